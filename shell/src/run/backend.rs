//! The effect backends the runtime drives: the provider, the tools (built-in, external and the
//! `skill` tool), the hooks, the session store, the project state and the freeze, behind one
//! small surface so that [`super::runtime`] stays a plain loop.
//!
//! Invariants:
//! - Nothing here decides policy; each method performs one effect and reports what happened.
//! - One freeze mechanism: [`freeze_now`] (through [`crate::extensions::freeze`]) at session
//!   start and on every refreeze; the receipt comes from [`crate::extensions::freeze::changes`],
//!   attributed with the sha of the bytes this session's own write/edit tools last wrote.
//! - An external call runs only with the source sha its plan showed (the core saw that plan and
//!   gated on it); bytes changed since make the call fail instead of running other code.
//! - A wire approval is stored against the full sha256 the plan computed for exactly the bytes
//!   shown, never against bytes read later.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use openmax_core::conversation::ModelRequest;
use openmax_core::machine::{Freeze, HookEvent, HookOutcome, Input};
use openmax_core::provider::RequestId;
use openmax_core::record::Record;
use openmax_core::tool::{RunSandbox, ToolOutcome, ToolPlan};
use openmax_core::wire::Mode;

use super::persist::Persistence;
use crate::config::{HookConfig, ProviderSettings};
use crate::digest::sha256_hex;
use crate::extensions::environment::{self, Environment};
use crate::extensions::freeze::{self as freezing, Entry, FreezeInputs, Frozen, Snapshot};
use crate::extensions::skills::{self, Skill, SKILL_TOOL};
use crate::extensions::{external, ExternalTool};
use crate::hooks::{self, FrozenHook, Origin};
use crate::mcp::{self, McpSet, StartContext};
use crate::provider::{Provider, ProviderConfig};
use crate::sandbox::Policy;
use crate::session::{Home, ProjectState, SessionWriter};
use crate::tools::ToolContext;

use super::input::InputTx;

/// What the plan and run jobs need of the current freeze.
#[derive(Default)]
struct Extensions {
    external: Vec<ExternalTool>,
    skills: Vec<Skill>,
    /// Named agents, for `task` calls.
    agents: Vec<crate::extensions::agents::Agent>,
    mcp: McpSet,
}

/// The MCP servers of the current freeze, seen from another thread (replaced by every
/// refreeze).
#[derive(Clone)]
pub struct McpView(Arc<Mutex<Arc<Extensions>>>);

impl McpView {
    /// `f` over the current set.
    pub fn with<R>(&self, f: impl FnOnce(&McpSet) -> R) -> R {
        let ext = self
            .0
            .lock()
            .map(|e| Arc::clone(&e))
            .unwrap_or_else(|p| Arc::clone(&p.into_inner()));
        f(&ext.mcp)
    }
}

/// A refreeze computed off the loop, installed when its `Frozen` input is handled.
struct PendingFreeze {
    frozen: Frozen,
    hooks: Vec<FrozenHook>,
    hook_configs: Option<Vec<(HookConfig, Origin)>>,
    mcp: McpSet,
    mcp_tools: BTreeMap<String, (String, String)>,
}

/// Full sha256 by (source_path, 12-hex source_sha), as computed by plans.
type ShaMemo = Arc<Mutex<BTreeMap<(String, String), String>>>;

/// Effects performed for one session.
pub struct Backend {
    /// The provider streams' backpressure window (see `provider::flow`).
    flow: std::sync::Arc<crate::provider::flow::StreamFlow>,
    home: Home,
    project: PathBuf,
    /// The working directory the session was started in (instruction files are read down to
    /// it); the project root unless [`Backend::set_working_dir`] says otherwise.
    cwd: PathBuf,
    provider: Provider,
    tools: ToolContext,
    state: ProjectState,
    writer: Persistence,
    ext: Arc<Extensions>,
    /// The same extensions for a frontend on another thread ([`McpView`]).
    shared: Arc<Mutex<Arc<Extensions>>>,
    /// The files behind the current freeze (for the next receipt).
    snapshot: Snapshot,
    hooks: Vec<FrozenHook>,
    /// `[[hooks]]` as configured (re-read on refreeze).
    hook_configs: Vec<(HookConfig, Origin)>,
    /// Snapshot key → sha256 of the bytes this session's own file tools last wrote there.
    agent_wrote: BTreeMap<String, String>,
    /// call_id → the 12-hex source sha its plan showed (external tools).
    planned: BTreeMap<String, String>,
    shas: ShaMemo,
    /// Where MCP servers run and report (reused by every refreeze).
    mcp_ctx: StartContext,
    /// The mode project MCP servers are started under (`auto` starts unapproved ones).
    mode: Mode,
    /// MCP servers the client gave (ACP `mcpServers`), started again by every refreeze.
    client_mcp: Vec<mcp::ServerDef>,
    /// Frozen MCP tools: full name → (sha of description and schema, defining file).
    mcp_tools: BTreeMap<String, (String, String)>,
    pending: Arc<Mutex<Option<PendingFreeze>>>,
    /// A refreeze's problems also go to stderr (see [`freeze_now`]).
    echo_notes: bool,
    /// The session's checkpoint thread (`None`: checkpoints are off).
    checkpoints: Option<crate::checkpoint::worker::Worker>,
    /// The project's checkpoint directory (where undo notes for this session wait).
    checkpoint_dir: Option<PathBuf>,
    /// How this session starts subagents (`None`: `task` calls fail).
    tasks: Option<Arc<crate::tasks::Spawner>>,
}

/// A freeze read from disk now, with the frozen hooks. Its problems (broken manifests and
/// skills, MCP servers that did not start) are notes for the model and the client; with
/// `echo`, they also go to stderr, for the frontends whose client is a program (`--stdio`,
/// `--acp`: stderr is the human's log there). `-p` and the terminal UI show the notes
/// themselves, so a copy on stderr would show each problem twice.
#[allow(clippy::too_many_arguments)]
pub fn freeze_now(
    home: &Path,
    project: &Path,
    cwd: &Path,
    state: &ProjectState,
    hook_configs: &[(HookConfig, Origin)],
    mcp: &McpSet,
    echo: bool,
) -> (Frozen, Vec<FrozenHook>) {
    let is_builtin = crate::extensions::is_reserved;
    // The clock is read here, at each freeze: the date is frozen with the rest of the prompt.
    let environment = Environment::new(
        project,
        cwd,
        environment::os_description(),
        environment::today(),
    );
    let inputs = FreezeInputs {
        project,
        home,
        cwd,
        environment: &environment,
        builtin_prompt: crate::extensions::prompt::BUILTIN,
        builtin_tools: crate::tools::builtin_schemas(),
        is_builtin: &is_builtin,
    };
    let mut frozen = freezing::freeze(&inputs);
    for p in frozen.problems.iter().filter(|_| echo) {
        eprintln!("openmax: extension not loaded: {p}");
    }
    frozen.freeze.tools.extend(mcp.schemas());
    for p in &mcp.problems {
        if echo {
            eprintln!("openmax: {p}");
        }
        frozen.freeze.notes.push(p.clone());
    }
    // A named agent's session: its instructions and only its tools (every refreeze too).
    if let Some(agent) = crate::tasks::inherited_agent() {
        crate::tasks::narrow_freeze(agent, &mut frozen.freeze);
    }
    let hooks = hooks::freeze(hook_configs, project, &|p, sha| {
        state.source_approved(p, sha)
    });
    for h in &hooks {
        for (path, sha) in &h.files {
            // A file both a tool and a hook run keeps its tool entry (same bytes either way).
            frozen
                .snapshot
                .files
                .entry(path.clone())
                .or_insert_with(|| Entry {
                    kind: "hook",
                    name: h.name.clone(),
                    sha256: sha.clone(),
                });
        }
    }
    frozen.freeze.hooks = hooks.iter().map(FrozenHook::spec).collect();
    (frozen, hooks)
}

/// Start the configured MCP servers (`tables` from the config layers, plus the project's
/// `.mcp.json`) and the client's (`client`, ACP's `mcpServers`, after them): user and client
/// servers always, project servers when their bytes are approved or `mode` is `auto`. A client
/// server named like a configured one is not started (the configured one stands) and a note
/// says so.
pub fn start_mcp(
    tables: &[mcp::config::McpSource],
    state: &ProjectState,
    mode: Mode,
    ctx: StartContext,
    client: &[mcp::ServerDef],
) -> impl Future<Output = McpSet> + Send + 'static {
    let project = state.project().to_path_buf();
    let keys = crate::sandbox::scrub::names();
    let (mut defs, mut problems) =
        mcp::load::load(tables, &project, &mcp::config::Lookup::process(&keys));
    for c in client {
        if let Some(d) = defs.iter().find(|d| d.name == c.name) {
            problems.push(format!(
                "MCP server {} of {} was not started: the server of that name in {} stands",
                c.name, c.file, d.file
            ));
        } else {
            defs.push(c.clone());
        }
    }
    let may_start = |d: &mcp::ServerDef| {
        d.origin == Origin::User
            || mode == Mode::Auto
            || mcp::gate::source_sha256(d, &project)
                .is_ok_and(|sha| state.source_approved(&d.file, &sha))
    };
    McpSet::start(defs, problems, ctx, &may_start)
}

/// The frozen MCP tools by name, with the sha of what the model sees of each and its file.
fn mcp_tool_map(set: &McpSet) -> BTreeMap<String, (String, String)> {
    let mut out = BTreeMap::new();
    for s in &set.servers {
        for t in &s.tools {
            let seen = serde_json::json!([t.description, t.input_schema, t.read_only]);
            out.insert(
                t.name.clone(),
                (sha256_hex(seen.to_string().as_bytes()), s.def.file.clone()),
            );
        }
    }
    out
}

/// The receipt lines for MCP tools added, removed or changed between two freezes.
fn mcp_changes(
    old: &BTreeMap<String, (String, String)>,
    new: &BTreeMap<String, (String, String)>,
) -> Vec<openmax_core::wire::event::FreezeChange> {
    let change = |name: &str, what: &str, file: &str| openmax_core::wire::event::FreezeChange {
        kind: "tool".into(),
        name: name.to_string(),
        change: what.into(),
        path: file.to_string(),
        by: "outside".into(),
    };
    let mut out = Vec::new();
    for (name, (sha, file)) in new {
        match old.get(name) {
            None => out.push(change(name, "added", file)),
            Some((o, _)) if o != sha => out.push(change(name, "changed", file)),
            Some(_) => {}
        }
    }
    for (name, (_, file)) in old {
        if !new.contains_key(name) {
            out.push(change(name, "removed", file));
        }
    }
    out
}

/// Build the provider client from resolved settings.
pub fn provider_from(settings: &ProviderSettings) -> Result<Provider, String> {
    let mut cfg = ProviderConfig::defaults(settings.kind);
    if let Some(url) = &settings.base_url {
        cfg.base_url = url.clone();
    }
    cfg.api_key = settings.api_key.clone();
    cfg.model = settings.model.clone();
    cfg.max_output_tokens = u32::try_from(settings.max_output_tokens).unwrap_or(u32::MAX);
    Provider::new(cfg).map_err(|e| format!("provider {}: {e}", settings.name))
}

impl Backend {
    /// A backend running on `frozen` (from [`freeze_now`]).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        home: Home,
        state: ProjectState,
        provider: Provider,
        writer: SessionWriter,
        frozen: &Frozen,
        hooks: Vec<FrozenHook>,
        hook_configs: Vec<(HookConfig, Origin)>,
        mcp: McpSet,
        mcp_ctx: StartContext,
        mode: Mode,
    ) -> Result<Backend, String> {
        let project = state.project().to_path_buf();
        let tools = ToolContext::new(&project, writer.session_id())
            .map_err(|e| format!("project {}: {e}", project.display()))?;
        let mcp_tools = mcp_tool_map(&mcp);
        let ext = Arc::new(Extensions {
            external: frozen.external.clone(),
            skills: frozen.skills.clone(),
            agents: frozen.agents.clone(),
            mcp,
        });
        Ok(Backend {
            flow: std::sync::Arc::new(crate::provider::flow::StreamFlow::new()),
            home,
            cwd: project.clone(),
            project,
            provider,
            tools,
            state,
            writer: Persistence::new(writer),
            mcp_tools,
            shared: Arc::new(Mutex::new(Arc::clone(&ext))),
            ext,
            snapshot: frozen.snapshot.clone(),
            hooks,
            hook_configs,
            agent_wrote: BTreeMap::new(),
            planned: BTreeMap::new(),
            shas: Arc::default(),
            mcp_ctx,
            client_mcp: Vec::new(),
            mode,
            pending: Arc::default(),
            echo_notes: true,
            checkpoints: None,
            checkpoint_dir: None,
            tasks: None,
        })
    }

    /// The working directory the session was started in (for every refreeze).
    pub fn set_working_dir(&mut self, cwd: PathBuf) {
        self.cwd = cwd;
    }

    /// Whether a refreeze's problems also go to stderr (see [`freeze_now`]).
    pub fn set_echo_notes(&mut self, echo: bool) {
        self.echo_notes = echo;
    }

    /// The built-in tools' time limits from now on.
    pub fn set_tool_timeouts(&mut self, t: crate::config::ToolTimeouts) {
        self.tools.tool_timeout_ms = t.tool_ms;
        self.tools.shell_timeout_ms = t.shell_ms;
    }

    /// `[tools.web_fetch]` from now on.
    pub fn set_web_policy(&mut self, web: crate::tools::web_fetch::policy::WebPolicy) {
        self.tools.web = web;
    }

    /// The running `task` calls and the finished children's totals (an empty board when this
    /// session starts no subagents).
    pub fn task_board(&self) -> crate::tasks::progress::Board {
        self.tasks
            .as_ref()
            .map(|s| s.progress.clone())
            .unwrap_or_default()
    }

    /// Start subagents (`task` calls) with `spawner` from now on.
    pub fn set_tasks(&mut self, spawner: crate::tasks::Spawner) {
        self.tasks = Some(Arc::new(spawner));
    }

    /// Run every agent process (tools, hooks) under `policy` from now on.
    pub fn set_sandbox(&mut self, policy: Policy) {
        self.tools.sandbox = Arc::new(policy);
    }

    /// Start one attempt of a model request; its items and failures arrive on `tx`.
    pub fn spawn_request(
        &self,
        request: RequestId,
        attempt: u32,
        body: ModelRequest,
        tx: InputTx,
    ) -> JoinHandle<()> {
        self.provider
            .spawn_with_flow(request, attempt, body, tx, self.flow.clone())
    }

    /// The loop took one provider item off the channel (the backpressure window's count).
    pub fn provider_item_taken(&self) {
        self.flow.taken();
    }

    /// A blocking job that inspects a tool call.
    pub fn plan_job(
        &self,
        name: String,
        args: serde_json::Value,
    ) -> impl FnOnce() -> ToolPlan + Send + 'static {
        let ctx = self.tools.clone();
        let ext = Arc::clone(&self.ext);
        let state = self.state.clone();
        let shas = Arc::clone(&self.shas);
        move || {
            let approved = |path: &str, full: &str| {
                if let Ok(mut m) = shas.lock() {
                    m.insert(
                        (path.to_string(), crate::extensions::source::short(full)),
                        full.to_string(),
                    );
                }
                state.source_approved(path, full)
            };
            if let Some(tool) = ext.external.iter().find(|t| t.name == name) {
                return external::plan(tool, &ctx.project, &args, &approved);
            }
            if ext.mcp.owns(&name) {
                return ext.mcp.plan(&name, &args, &ctx.project, &approved);
            }
            if name == SKILL_TOOL && !ext.skills.is_empty() {
                return plan_skill(&ext.skills, &args);
            }
            if name == openmax_core::tool::TASK_TOOL {
                return crate::tasks::plan(&args, &ext.agents);
            }
            crate::tools::plan(&ctx, &name, &args)
        }
    }

    /// Remember what a plan showed (the source sha an external call must still have when run).
    pub fn note_planned(&mut self, call_id: &str, plan: &ToolPlan) {
        if let Some(gate) = &plan.source {
            self.planned
                .insert(call_id.to_string(), gate.source_sha.clone());
        }
    }

    /// A future that runs a tool call until done or `cancel` fires, in the sandbox the core
    /// chose (`sandbox`, from the run-tool effect); a `task` call's child reaches the core
    /// over `link`.
    pub fn run_job(
        &mut self,
        call_id: &str,
        name: String,
        args: serde_json::Value,
        cancel: oneshot::Receiver<()>,
        sandbox: RunSandbox,
        link: Option<crate::tasks::Link>,
    ) -> impl Future<Output = ToolOutcome> + Send + 'static {
        let mut ctx = self.tools.clone();
        ctx.run_sandbox = sandbox;
        let ext = Arc::clone(&self.ext);
        let planned = self.planned.remove(call_id);
        let barrier = self.before_call(&name, &args);
        let call_id = call_id.to_string();
        let tasks = (name == openmax_core::tool::TASK_TOOL)
            .then(|| self.tasks.clone())
            .flatten();
        async move {
            let mut cancel = cancel;
            if let Some(b) = barrier {
                // The turn's checkpoint is on disk before the call's process starts or its
                // file is written.
                tokio::select! {
                    biased;
                    r = &mut cancel => if r.is_ok() {
                        return ToolOutcome {
                            ok: false,
                            output: format!("{name}: cancelled before it started"),
                            diffs: Vec::new(),
                            images: Vec::new(),
                        };
                    },
                    _ = b => {}
                }
            }
            let mut outcome = match tasks {
                Some(spawner) => {
                    spawner
                        .run(call_id, args, ext.agents.clone(), cancel, link)
                        .await
                }
                None => Self::run_call(ctx.clone(), ext, planned, name, args, cancel).await,
            };
            // The provider key never reaches the session file or the model.
            outcome.output = ctx.sandbox.redact(&outcome.output);
            outcome
        }
    }

    async fn run_call(
        ctx: ToolContext,
        ext: Arc<Extensions>,
        planned: Option<String>,
        name: String,
        args: serde_json::Value,
        cancel: oneshot::Receiver<()>,
    ) -> ToolOutcome {
        // Only the built-in shell plans another sandbox; anything else asked to is not run.
        let builtin_shell =
            name == "shell" && !ext.mcp.owns(&name) && !ext.external.iter().any(|t| t.name == name);
        if ctx.run_sandbox != RunSandbox::Session && !builtin_shell {
            return ToolOutcome {
                ok: false,
                output: format!(
                    "{name}: not run: only the built-in shell tool runs outside the session's \
                     sandbox"
                ),
                diffs: Vec::new(),
                images: Vec::new(),
            };
        }
        if ext.mcp.owns(&name) {
            return ext
                .mcp
                .call(&name, args, planned, ctx.output_cap_bytes, cancel)
                .await;
        }
        {
            if let Some(tool) = ext.external.iter().find(|t| t.name == name) {
                let Some(sha) = planned else {
                    return ToolOutcome {
                        ok: false,
                        output: format!("external tool {name} was not inspected before running"),
                        diffs: Vec::new(),
                        images: Vec::new(),
                    };
                };
                return external::run(tool, &ctx.project, &args, &sha, &ctx, cancel).await;
            }
            if name == SKILL_TOOL && !ext.skills.is_empty() {
                return match skills::load(&ext.skills, &args) {
                    Ok(body) => ToolOutcome {
                        ok: true,
                        output: body,
                        diffs: Vec::new(),
                        images: Vec::new(),
                    },
                    Err(e) => ToolOutcome {
                        ok: false,
                        output: e,
                        diffs: Vec::new(),
                        images: Vec::new(),
                    },
                };
            }
            crate::tools::run(&ctx, &name, &args, cancel).await
        }
    }

    /// A future that runs the frozen hook `hook` for `event`, with the project added to the
    /// core's payload.
    pub fn hook_job(
        &self,
        hook: &str,
        event: HookEvent,
        mut payload: serde_json::Value,
        cancel: oneshot::Receiver<()>,
    ) -> impl Future<Output = HookOutcome> + Send + 'static {
        let found = self
            .hooks
            .iter()
            .find(|h| h.name == hook && h.config.event == event)
            .cloned();
        let project = self.project.clone();
        if let serde_json::Value::Object(m) = &mut payload {
            m.entry("project")
                .or_insert_with(|| project.display().to_string().into());
        }
        let session = self.tools.agent_session.clone();
        let sandbox = Arc::clone(&self.tools.sandbox);
        let missing = format!("no frozen hook {hook} for {}", event.as_str());
        let barrier = self.checkpoints.as_ref().and_then(|w| w.barrier());
        async move {
            if let Some(b) = barrier {
                let _ = b.await;
            }
            let outcome = match found {
                Some(h) => hooks::run(&h, &project, &payload, &session, &sandbox, cancel).await,
                None => HookOutcome::Failed { detail: missing },
            };
            match outcome {
                HookOutcome::Refuse { reason } => HookOutcome::Refuse {
                    reason: sandbox.redact(&reason),
                },
                HookOutcome::Failed { detail } => HookOutcome::Failed {
                    detail: sandbox.redact(&detail),
                },
                HookOutcome::Rewrite { args } => HookOutcome::Rewrite {
                    args: redact_json(&sandbox, args),
                },
                HookOutcome::Pass => HookOutcome::Pass,
            }
        }
    }

    /// Checkpoint turns that write into `project` from now on (on a thread of their own).
    pub fn set_checkpoints(&mut self, project: crate::checkpoint::Project) -> Result<(), String> {
        self.checkpoint_dir = Some(project.dir.clone());
        let session = self.tools.agent_session.clone();
        let worker = crate::checkpoint::worker::Worker::start(project, session)
            .map_err(|e| format!("cannot start the checkpoint thread: {e}"))?;
        self.checkpoints = Some(worker);
        Ok(())
    }

    /// Hand a checkpoint to the checkpoint thread (its answer comes on `tx`); the answer at
    /// once when there is no thread.
    pub fn checkpoint(
        &mut self,
        turn: u64,
        moment: openmax_core::machine::CheckpointMoment,
        prompt: String,
        tx: InputTx,
    ) -> Option<Input> {
        match &mut self.checkpoints {
            Some(w) => {
                w.take(
                    turn,
                    moment,
                    prompt,
                    Box::new(move |input| {
                        let _ = tx.send(input);
                    }),
                );
                None
            }
            None => Some(Input::Checkpointed {
                turn,
                moment,
                id: None,
                note: Some(format!(
                    "no checkpoint was taken for turn {turn}: checkpoints could not start in                      this session; undo cannot restore this turn"
                )),
            }),
        }
    }

    /// What a call must wait for before it runs: the turn's checkpoint, and for a file tool the
    /// capture of the path it writes.
    fn before_call(
        &mut self,
        name: &str,
        args: &serde_json::Value,
    ) -> Option<crate::checkpoint::worker::Done> {
        let w = self.checkpoints.as_mut()?;
        if matches!(name, "write_file" | "edit_file") {
            let arg = args.get("path").and_then(|v| v.as_str()).unwrap_or("");
            if let Ok(r) = crate::tools::path::resolve(&self.project, arg) {
                return w.capture(r.resolved_rel);
            }
        }
        w.barrier()
    }

    /// Undo notes another process left for this session's next turn, taken (each once).
    pub fn take_undo_notes(&self) -> Vec<String> {
        match &self.checkpoint_dir {
            Some(dir) if crate::checkpoint::notes::waiting(dir, &self.tools.agent_session) => {
                crate::checkpoint::notes::take(dir, &self.tools.agent_session)
            }
            _ => Vec::new(),
        }
    }

    /// Wait until every checkpoint handed over is on disk.
    pub fn finish_checkpoints(&mut self) {
        if let Some(w) = &mut self.checkpoints {
            w.finish();
        }
    }

    /// Make a session created unsettled durable and findable (see
    /// [`SessionWriter::create_unsettled`]); a no-op for a resumed or settled one.
    pub fn settle_session(&mut self) -> Result<(), String> {
        self.writer.settle().map_err(|e| e.to_string())
    }

    /// Append the session record on its own thread from now on, answering on `tx`.
    pub fn start_persistence(&mut self, tx: InputTx) -> Result<(), String> {
        self.writer
            .start(tx)
            .map_err(|e| format!("cannot start the session writer: {e}"))
    }

    /// Append records to the session file (durably) as `ticket`: the answer, when it is known
    /// at once (inline, or the writer is gone); otherwise it comes on the input channel.
    pub fn persist(&mut self, ticket: u64, records: Vec<Record>) -> Option<Input> {
        self.writer.append(ticket, records)
    }

    /// End the MCP servers' connections (their HTTP sessions are deleted), at most `within`.
    pub async fn close_mcp(&self, within: std::time::Duration) {
        let _ = tokio::time::timeout(within, self.ext.mcp.close()).await;
    }

    /// Wait until every append handed to the writer is done.
    pub fn finish_persistence(&mut self) {
        self.writer.finish();
    }

    /// Save the approval mode for the project.
    pub fn save_mode(&mut self, mode: Mode) -> Result<(), String> {
        self.state.save_mode(mode).map_err(|e| {
            format!(
                "could not save the mode in {}: {e}",
                self.state.dir().display()
            )
        })?;
        self.mode = mode;
        Ok(())
    }

    /// Record a human's approval (over the wire) of the bytes a plan showed as `source_sha`
    /// (the first 12 hex of their framed sha256).
    /// The provider requests go to (the terminal UI's `/model` switches its model).
    pub fn provider(&self) -> &Provider {
        &self.provider
    }

    /// The sandbox policy agent processes run under.
    pub fn sandbox_policy(&self) -> Arc<Policy> {
        self.tools.sandbox.clone()
    }

    pub fn approve_source(&self, source_path: &str, source_sha: &str) -> Result<(), String> {
        let key = (source_path.to_string(), source_sha.to_ascii_lowercase());
        let full = self.shas.lock().ok().and_then(|m| m.get(&key).cloned());
        let Some(full) = full else {
            return Err(format!(
                "no inspected source {source_path} with sha {source_sha}; nothing was recorded"
            ));
        };
        self.state
            .approve_source(source_path, &full)
            .map_err(|e| e.to_string())
    }

    /// Remember the files a finished tool call wrote (its diffs) with the sha of their bytes
    /// now, so a refreeze can say that this session's agent changed them.
    pub fn note_tool_done(&mut self, outcome: &ToolOutcome) {
        for d in &outcome.diffs {
            let path = self.project.join(&d.path);
            if let Ok(bytes) = std::fs::read(&path) {
                let key = freezing::snapshot_key(&self.project, &path);
                self.agent_wrote.insert(key, sha256_hex(&bytes));
            }
        }
    }

    /// Re-read the prompt, tools, skills, hooks and MCP servers for `reload` (the servers are
    /// started anew and re-listed), with the receipt of what changed and who changed it. The
    /// future computes the new freeze; [`Backend::install_refreeze`] swaps it in when its
    /// `Frozen` input is handled (no call is in flight during a reload).
    pub fn refreeze_job(&self) -> impl Future<Output = Freeze> + Send + 'static {
        let home = self.home.root().to_path_buf();
        let project = self.project.clone();
        let cwd = self.cwd.clone();
        let state = self.state.clone();
        let old_hooks = self.hook_configs.clone();
        let old_snapshot = self.snapshot.clone();
        let old_mcp = self.mcp_tools.clone();
        let agent_wrote = self.agent_wrote.clone();
        let ctx = self.mcp_ctx.clone();
        let mode = self.mode;
        let client_mcp = self.client_mcp.clone();
        let pending = Arc::clone(&self.pending);
        let echo = self.echo_notes;
        async move {
            let mut notes = Vec::new();
            let mut trusted_by_config = false;
            let (hook_configs, tables) = match crate::config::load_layers(&home, &project) {
                Ok(layers) => {
                    trusted_by_config = layers.trusted_projects().contains(&project);
                    (Some(layers.hooks), layers.mcp)
                }
                Err(e) => {
                    if echo {
                        eprintln!("openmax: hooks and MCP servers not re-read: {e}");
                    }
                    notes.push(format!(
                        "hooks and MCP servers not re-read (the previous hooks stay frozen): {e}"
                    ));
                    (None, Vec::new())
                }
            };
            let mcp = start_mcp(&tables, &state, mode, ctx, &client_mcp).await;
            let (frozen, hooks) = freeze_now(
                &home,
                &project,
                &cwd,
                &state,
                hook_configs.as_deref().unwrap_or(&old_hooks),
                &mcp,
                echo,
            );
            let mcp_tools = mcp_tool_map(&mcp);
            let mut freeze = frozen.freeze.clone();
            freeze.changes = freezing::changes(&old_snapshot, &frozen.snapshot, &agent_wrote);
            freeze.changes.extend(mcp_changes(&old_mcp, &mcp_tools));
            freeze.notes.extend(notes);
            // Trust is read again too: a project trusted since the session began runs turns.
            freeze.trusted = Some(state.trusted() || trusted_by_config);
            if let Ok(mut p) = pending.lock() {
                *p = Some(PendingFreeze {
                    frozen,
                    hooks,
                    hook_configs,
                    mcp,
                    mcp_tools,
                });
            }
            freeze
        }
    }

    /// Swap in the freeze the last [`Backend::refreeze_job`] computed (the old MCP servers are
    /// stopped as their set is dropped).
    pub fn install_refreeze(&mut self) {
        let Some(p) = self.pending.lock().ok().and_then(|mut p| p.take()) else {
            return;
        };
        if let Some(h) = p.hook_configs {
            self.hook_configs = h;
        }
        self.snapshot = p.frozen.snapshot;
        let old = std::mem::replace(
            &mut self.ext,
            Arc::new(Extensions {
                external: p.frozen.external,
                skills: p.frozen.skills,
                agents: p.frozen.agents,
                mcp: p.mcp,
            }),
        );
        // The servers of the old freeze end their sessions once their calls are done.
        tokio::spawn(old.mcp.close());
        if let Ok(mut s) = self.shared.lock() {
            *s = Arc::clone(&self.ext);
        }
        self.hooks = p.hooks;
        self.mcp_tools = p.mcp_tools;
    }

    /// The project directory.
    pub fn project(&self) -> &Path {
        &self.project
    }

    /// The MCP servers of the current freeze, for a frontend on another thread (the terminal
    /// UI's `@server:uri` mentions and MCP prompt commands).
    pub fn mcp_view(&self) -> McpView {
        McpView(Arc::clone(&self.shared))
    }

    /// Let the file tools read and write through the client's files (ACP `fs`).
    pub fn set_client_files(&mut self, files: crate::tools::client_files::ClientFilesRef) {
        self.tools.client_files = files;
    }

    /// The client's MCP servers (ACP `mcpServers`), already started at open; every refreeze
    /// starts them again with the configured ones.
    pub fn set_client_mcp(&mut self, defs: Vec<mcp::ServerDef>) {
        self.client_mcp = defs;
    }
}

fn plan_skill(skills: &[Skill], args: &serde_json::Value) -> ToolPlan {
    let name = args.get("name").and_then(|v| v.as_str()).unwrap_or("");
    let invalid = skills::load(skills, args).err();
    ToolPlan {
        mutating: false,
        targets: vec![name.to_string()],
        summary: format!("load skill {name}"),
        detail: String::new(),
        source: None,
        invalid,
        sandbox: Default::default(),
        confirm: None,
    }
}

/// `v` with every string (keys included) redacted: a hook's rewritten arguments hold no secret
/// the hook found.
fn redact_json(sandbox: &crate::sandbox::Policy, v: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::String(s) => Value::String(sandbox.redact(&s)),
        Value::Array(a) => Value::Array(a.into_iter().map(|x| redact_json(sandbox, x)).collect()),
        Value::Object(o) => Value::Object(
            o.into_iter()
                .map(|(k, x)| (sandbox.redact(&k), redact_json(sandbox, x)))
                .collect(),
        ),
        other => other,
    }
}
