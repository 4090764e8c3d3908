//! Opening a session, shared by every frontend (`--stdio`, `-p`, the terminal UI, ACP):
//! project, config, trust and mode, the session to resume or copy, MCP servers, freeze,
//! session file, backend and core ([`open`]). A frontend passes what it asks for in as data
//! ([`Flags`], [`Resume`], [`Opener`]) and gets an [`Opened`] session to run; nothing here
//! knows a frontend.
//!
//! Invariants:
//! - Every failure is an [`OpenError`]: one clear message and an exit code, nothing on stdout.
//! - A session's openmax is not dumpable and is a child subreaper; what a SIGKILLed openmax
//!   left of its tool calls in the project is killed before the session starts.

pub mod demo;
pub mod project;
mod setup;

use std::path::{Path, PathBuf};

use openmax_core::machine::{CoreConfig, Freeze};
use openmax_core::record::Record;
use openmax_core::wire::Mode;
use openmax_core::Core;
use sha2::{Digest, Sha256};

use crate::config::Overrides;
use crate::mcp::StartContext;
use crate::run::backend::{self, Backend};
use crate::session::resume::{Copied, Resumed};
use crate::session::{resume_latest, ProjectState, SessionWriter};
use setup::Setup;

pub use crate::human::AGENT_ENV;
pub use setup::{project_of, protected_entries, session_confine};

/// What a start-up takes from the command line: the provider flags and `--project`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Flags {
    pub provider: Option<String>,
    pub model: Option<String>,
    pub base_url: Option<String>,
    /// `--project DIR`: where the project is discovered from (else the working directory).
    pub project: Option<PathBuf>,
}

impl Flags {
    /// The provider flags as config overrides (the strongest layer).
    pub fn overrides(&self) -> Overrides {
        Overrides {
            provider: self.provider.clone(),
            model: self.model.clone(),
            base_url: self.base_url.clone(),
        }
    }
}

/// Whether this process was started by an agent.
pub fn agent_spawned() -> bool {
    std::env::var_os(AGENT_ENV).is_some()
}

/// Which session a start-up opens.
pub(crate) enum Resume {
    /// A new session.
    New,
    /// The project's latest session (`--continue`).
    Latest,
    /// The session with this id (ACP `session/load`).
    Id(String),
    /// The session whose id is this or starts with it (`--resume`).
    Prefix(String),
    /// A new session whose history is a copy of that one's (`--fork`).
    Fork(String),
}

/// A session opened and ready to run: its core, its effect backend, and what the frontend
/// needs to start it.
pub(crate) struct Opened {
    pub core: Core,
    pub backend: Backend,
    pub session_id: String,
    pub project: String,
    pub transcript: Option<openmax_core::wire::Transcript>,
    pub mode: Mode,
    /// The model's name (the terminal UI shows it).
    pub model: String,
    /// The user's prices, when set (the cost of a run is known).
    pub prices: Option<openmax_core::usage::Prices>,
    /// The project's prompt history file (the terminal UI's Up and Down).
    pub prompt_history: PathBuf,
    /// Notices of the MCP servers' start and life, for `Runtime::forward_notices`.
    pub notices: tokio::sync::mpsc::UnboundedReceiver<String>,
    /// The project's state (its sessions).
    pub state: ProjectState,
    /// Whether the project is trusted (its state or the user config's `[trust]`).
    pub trusted: bool,
    /// `$OPENMAX_HOME`.
    pub home: PathBuf,
    /// The project's checkpoints when this session takes them (the terminal UI's `/undo`,
    /// ACP's).
    pub checkpoints: Option<crate::checkpoint::Project>,
}

/// Why a start-up failed: the stderr message and the exit code.
pub(crate) struct OpenError {
    pub code: i32,
    pub message: String,
    /// Refused because the project is not trusted (only when the opener asked for that).
    pub untrusted: bool,
}

impl OpenError {
    fn new(message: impl Into<String>) -> OpenError {
        OpenError {
            code: 1,
            message: message.into(),
            untrusted: false,
        }
    }
}

/// What a `-p` run asks of its session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct PrintOpen {
    /// `--mode`: this run's mode, never saved (an agent-spawned run may only tighten it).
    pub mode: Option<Mode>,
    /// The driver ends the input itself (`--output-schema` may ask once more).
    pub driver_ends_input: bool,
}

/// How a frontend opens a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Opener {
    /// `--stdio`: an untrusted project still gets its session (its turns are refused one by
    /// one, as the contract says).
    Stdio,
    /// The terminal UI: as `--stdio`; it shows the freeze's notes itself.
    Tui,
    /// `-p`: a non-interactive turn; it shows the freeze's notes itself.
    Print(PrintOpen),
    /// ACP's `session/new` and `session/load`: an untrusted project is refused before anything
    /// is started or written, so a refused request leaves no session behind.
    Acp,
}

/// The first lines a client reads of an opened session: `hello`, then, for a resumed or copied
/// session, its `transcript` (`--stdio` and `-p --output-format stream-json`).
pub(crate) fn handshake(
    session_id: &str,
    project: &str,
    transcript: Option<&openmax_core::wire::Transcript>,
) -> Vec<String> {
    let hello = openmax_core::wire::Hello::new(
        session_id,
        env!("CARGO_PKG_VERSION"),
        project,
        transcript.is_some(),
    );
    let mut lines = vec![hello.to_json()];
    lines.extend(transcript.map(|t| t.to_json()));
    lines
}

/// A new session id: 16 hex of sha256(time, pid, counter).
pub fn new_session_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let mut h = Sha256::new();
    h.update(t.to_le_bytes());
    h.update(std::process::id().to_le_bytes());
    h.update(N.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    let d = h.finalize();
    d[..8].iter().map(|b| format!("{b:02x}")).collect()
}

fn seed_of(session_id: &str) -> u64 {
    let d = Sha256::digest(session_id.as_bytes());
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[..8]);
    u64::from_le_bytes(b)
}

/// Open a session: settings, provider, the sandbox set-up, the session to resume, trust and
/// mode, the MCP servers, the freeze, the session file, the backend and the core. `project`
/// overrides the discovered project (ACP's `cwd`); `opener` says which frontend opens it;
/// `client_mcp` are the client's MCP servers (ACP's `mcpServers`), started with the
/// configured ones. Runs on the session's runtime: the MCP servers' connections live on it.
/// (A little over 80 lines: the start-up's steps in their order, one call each, most of the
/// length being the patterns that name what each step returns.)
pub(crate) async fn open(
    flags: &Flags,
    project: Option<&Path>,
    resume: Resume,
    opener: Opener,
    client_mcp: Vec<crate::mcp::ServerDef>,
) -> Result<Opened, OpenError> {
    // The freeze's problems also go to stderr where the client is a program.
    let echo_notes = matches!(opener, Opener::Stdio | Opener::Acp);
    let Prepared {
        setup,
        provider,
        state,
        trusted,
        sandbox,
    } = prepare(flags, project, opener)?;
    let picked = Picked::read(&state, resume)?;
    let session_id = picked.session_id();
    let mode = picked.mode(&setup, &state, opener)?;
    let Sources {
        mcp,
        mcp_ctx,
        notices,
        frozen,
        hooks,
        hook_configs,
    } = Sources::start(
        &setup,
        &state,
        mode,
        &sandbox,
        &session_id,
        &client_mcp,
        echo_notes,
    )
    .await;
    let project = state.project().display().to_string();
    let mut turns_before = picked.turns();
    let record = picked.into_record(&frozen.freeze, &mcp, &client_mcp, &state, &session_id)?;
    let caps = setup.settings.checkpoints;
    let checkpoints = caps
        .enabled
        .then(|| crate::checkpoint::Project::new(setup.home.root(), &state, caps));
    let mut backend = Backend::new(
        setup.home.clone(),
        state.clone(),
        provider,
        record.writer,
        &frozen,
        hooks,
        hook_configs,
        mcp,
        mcp_ctx,
        mode,
    )
    .map_err(OpenError::new)?;
    configure(
        &mut backend,
        &setup,
        sandbox,
        client_mcp,
        echo_notes,
        &session_id,
    );
    if let Some(p) = &checkpoints {
        turns_before = turns_before.max(start_checkpoints(&mut backend, p, &setup, &session_id)?);
    }
    let cfg = CoreSettings {
        trusted,
        mode,
        opener,
        checkpoints: checkpoints.is_some(),
        turns_before,
    }
    .config(&setup, &session_id, record.freeze, record.history);
    Ok(Opened {
        core: Core::new(cfg),
        backend,
        session_id,
        project,
        transcript: record.transcript,
        mode,
        model: setup.settings.provider.model.clone(),
        prices: setup.settings.provider.prices,
        prompt_history: state.prompt_history(),
        notices,
        trusted,
        home: setup.home.root().to_path_buf(),
        checkpoints,
        state,
    })
}

/// A session's ground before its record: the set-up, the provider, the project's state, trust
/// (ACP refuses an untrusted project here, before anything is started or written), the
/// sandbox policy; this process taken over ([`take_over_process`]).
struct Prepared {
    setup: Setup,
    provider: crate::provider::Provider,
    state: ProjectState,
    trusted: bool,
    sandbox: crate::sandbox::Policy,
}

fn prepare(flags: &Flags, project: Option<&Path>, opener: Opener) -> Result<Prepared, OpenError> {
    let print = matches!(opener, Opener::Print(_));
    let setup = match project {
        Some(p) => setup::setup_at(flags, p),
        None => setup::setup(flags, print),
    }
    .map_err(OpenError::new)?;
    let provider = backend::provider_from(&setup.settings.provider).map_err(OpenError::new)?;
    let state = ProjectState::open(&setup.home, &setup.project);
    crate::session::perms::check(setup.home.root(), Some(state.dir())).map_err(OpenError::new)?;
    let trusted = state.trusted() || setup.settings.trusts(state.project());
    if !trusted && opener == Opener::Acp {
        return Err(OpenError {
            code: 1,
            message: format!(
                "the project {} is not trusted: run `openmax --trust` in it first",
                state.project().display()
            ),
            untrusted: true,
        });
    }
    let sandbox = setup::sandbox_policy(&setup.settings, &state, setup.home.root())
        .map_err(OpenError::new)?;
    take_over_process(&sandbox);
    Ok(Prepared {
        setup,
        provider,
        state,
        trusted,
        sandbox,
    })
}

/// A session's tool sources: its MCP servers (started concurrently before the freeze; their
/// notices reach the core once the runtime loop runs) and the freeze of its tools, skills,
/// prompt and hooks.
struct Sources {
    mcp: crate::mcp::McpSet,
    mcp_ctx: StartContext,
    notices: tokio::sync::mpsc::UnboundedReceiver<String>,
    frozen: crate::extensions::freeze::Frozen,
    hooks: Vec<crate::hooks::FrozenHook>,
    hook_configs: Vec<(crate::config::HookConfig, crate::hooks::Origin)>,
}

impl Sources {
    async fn start(
        setup: &Setup,
        state: &ProjectState,
        mode: Mode,
        sandbox: &crate::sandbox::Policy,
        session_id: &str,
        client_mcp: &[crate::mcp::ServerDef],
        echo_notes: bool,
    ) -> Sources {
        let (notice_tx, notices) = tokio::sync::mpsc::unbounded_channel::<String>();
        let mcp_ctx = StartContext {
            project: state.project().to_path_buf(),
            log_path: Some(state.sessions_dir().join(format!("{session_id}.mcp.log"))),
            agent_session: session_id.to_string(),
            notices: Some(notice_tx),
            policy: sandbox.clone(),
        };
        let mcp = backend::start_mcp(
            &setup.settings.mcp,
            state,
            mode,
            mcp_ctx.clone(),
            client_mcp,
        )
        .await;
        let hook_configs = setup.settings.hooks.clone();
        let (frozen, hooks) = backend::freeze_now(
            setup.home.root(),
            state.project(),
            &setup.start,
            state,
            &hook_configs,
            &mcp,
            echo_notes,
        );
        Sources {
            mcp,
            mcp_ctx,
            notices,
            frozen,
            hooks,
            hook_configs,
        }
    }
}

/// What the core is told beyond the settings: what the start-up decided.
struct CoreSettings {
    trusted: bool,
    mode: Mode,
    opener: Opener,
    checkpoints: bool,
    turns_before: u64,
}

impl CoreSettings {
    fn config(
        self,
        setup: &Setup,
        session_id: &str,
        freeze: Freeze,
        history: Vec<openmax_core::conversation::Message>,
    ) -> CoreConfig {
        let mut cfg = CoreConfig::new(session_id, freeze);
        cfg.seed = seed_of(session_id);
        cfg.trusted = self.trusted;
        cfg.agent_spawned = agent_spawned();
        cfg.mode = self.mode;
        cfg.permissions = setup.settings.permissions.clone();
        cfg.retry = setup.settings.retry.clone();
        cfg.limits = setup.settings.limits.clone();
        cfg.context_tokens = setup.settings.context_tokens;
        cfg.history = history;
        cfg.non_interactive = matches!(self.opener, Opener::Print(_));
        cfg.driver_ends_input = matches!(self.opener, Opener::Print(p) if p.driver_ends_input);
        cfg.checkpoints = self.checkpoints;
        cfg.turns_before = self.turns_before;
        cfg.tasks = openmax_core::machine::TaskLimits {
            depth: crate::tasks::depth_from_env(),
            ..setup.settings.tasks
        };
        // A named agent's session: only its tools, and at most its tool rounds.
        if let Some(agent) = crate::tasks::inherited_agent() {
            cfg.only_tools = agent.tools.clone();
            if let Some(n) = agent.max_iterations {
                cfg.limits.max_iterations = cfg.limits.max_iterations.min(n);
            }
        }
        cfg
    }
}

/// What this process becomes before a session starts: not dumpable (no process of the same
/// user, the agent's included, can read its environment, the provider key, or its memory
/// through /proc or ptrace), a human's session ([`crate::human::mark_session`]), a child
/// subreaper; and what an earlier openmax left running in the project is killed.
fn take_over_process(sandbox: &crate::sandbox::Policy) {
    // SAFETY: plain prctl with integer arguments.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
    crate::human::mark_session();
    if let Err(e) = crate::sandbox::reaper::become_subreaper() {
        eprintln!("openmax: could not become a child subreaper ({e}); a process a tool starts with setsid may outlive its call");
    }
    if let Some(dir) = &sandbox.running_dir {
        let n = crate::sandbox::reaper::kill_survivors(dir);
        if n > 0 {
            eprintln!("openmax: killed {n} process(es) left running by an earlier openmax in this project");
        }
    }
}

/// The session a start-up picked: a resumed one, a copy of one, or none (a new session).
struct Picked {
    resumed: Option<Resumed>,
    forked: Option<Copied>,
    new_id: String,
}

/// The session's record as opened: its writer, the freeze it runs with, its history and, for
/// a resumed or copied session, the transcript the client is shown.
struct Opening {
    writer: SessionWriter,
    freeze: Freeze,
    history: Vec<openmax_core::conversation::Message>,
    transcript: Option<openmax_core::wire::Transcript>,
}

impl Picked {
    /// Read the session `resume` names; its notices go to stderr.
    fn read(state: &ProjectState, resume: Resume) -> Result<Picked, OpenError> {
        let (resumed, forked) = match resume {
            Resume::New => (None, None),
            Resume::Latest => (Some(resume_latest(state)), None),
            Resume::Id(id) => (Some(crate::session::resume_id(state, &id)), None),
            Resume::Prefix(p) => (Some(crate::session::resume::resume_prefix(state, &p)), None),
            Resume::Fork(p) => (None, Some(crate::session::resume::read_copy(state, &p))),
        };
        Ok(Picked {
            resumed: taken(resumed, |r| &r.notices)?,
            forked: taken(forked, |c| &c.notices)?,
            new_id: new_session_id(),
        })
    }

    fn session_id(&self) -> String {
        self.resumed
            .as_ref()
            .map(|r| r.session_id.clone())
            .unwrap_or_else(|| self.new_id.clone())
    }

    /// Turns the session already had.
    fn turns(&self) -> u64 {
        self.resumed.as_ref().map(|r| r.turns).unwrap_or(0)
    }

    /// The mode the session runs in: the demo's, the project's saved one, the picked
    /// session's, else `ask`; `-p --mode` for this run only (the saved mode is left as it is).
    fn mode(&self, setup: &Setup, state: &ProjectState, opener: Opener) -> Result<Mode, OpenError> {
        let mode = setup
            .demo
            .or_else(|| state.mode())
            .or(self.resumed.as_ref().and_then(|r| r.mode))
            .or(self.forked.as_ref().and_then(|c| c.mode))
            .unwrap_or(Mode::Ask);
        match opener {
            Opener::Print(PrintOpen {
                mode: Some(wanted), ..
            }) => Mode::for_one_run(mode, wanted, agent_spawned()).map_err(|message| OpenError {
                code: crate::exit::NOPERM,
                message,
                untrusted: false,
            }),
            // A subagent runs in the mode of the session that started it when that is
            // stricter.
            _ => Ok(crate::tasks::narrowed_mode(mode)),
        }
    }

    /// The record the session writes to: the resumed one, a new one holding a copy of the
    /// picked session's history, or a new empty one (discarded if no turn uses it).
    fn into_record(
        self,
        frozen: &Freeze,
        mcp: &crate::mcp::McpSet,
        client_mcp: &[crate::mcp::ServerDef],
        state: &ProjectState,
        session_id: &str,
    ) -> Result<Opening, OpenError> {
        let project = state.project().display().to_string();
        let mut freeze = frozen.clone();
        if let Some(r) = self.resumed {
            freeze.system = r.system;
            freeze.tools = with_client_tools(r.tools, mcp, client_mcp);
            return Ok(Opening {
                writer: r.writer,
                freeze,
                history: r.history,
                transcript: Some(r.transcript),
            });
        }
        if let Some(c) = self.forked {
            freeze.system = c.system;
            freeze.tools = with_client_tools(c.tools, mcp, client_mcp);
            let writer = fork_writer(state, session_id, &project, &freeze, &c.history)
                .map_err(|e| OpenError::new(format!("could not fork session {}: {e}", c.from)))?;
            let mut t = c.transcript;
            t.session_id = session_id.to_string();
            return Ok(Opening {
                writer,
                freeze,
                history: c.history,
                transcript: Some(t),
            });
        }
        let header = Record::Session {
            session_id: session_id.to_string(),
            project,
            system: freeze.system.clone(),
            tools: freeze.tools.clone(),
        };
        let mut writer = SessionWriter::create_unsettled(state, session_id, header)
            .map_err(|e| OpenError::new(format!("could not start a session: {e}")))?;
        writer.discard_when_unused();
        Ok(Opening {
            writer,
            freeze,
            history: Vec::new(),
            transcript: None,
        })
    }
}

/// A resumed or copied session, its notices on stderr; a failure is the start-up's error.
fn taken<T>(
    read: Option<Result<T, crate::session::resume::ResumeError>>,
    notices: impl Fn(&T) -> &Vec<String>,
) -> Result<Option<T>, OpenError> {
    match read {
        Some(Ok(t)) => {
            for n in notices(&t) {
                eprintln!("openmax: {n}");
            }
            Ok(Some(t))
        }
        Some(Err(e)) => Err(OpenError {
            code: e.exit_code(),
            message: e.to_string(),
            untrusted: false,
        }),
        None => Ok(None),
    }
}

/// The backend's settings beyond its construction: the sandbox, the working directory, the
/// client's MCP servers, the limits and policies from the config, and the `task` tool's
/// spawner (what a child inherits: provider, model, endpoint, key, home, depth).
fn configure(
    backend: &mut Backend,
    setup: &Setup,
    sandbox: crate::sandbox::Policy,
    client_mcp: Vec<crate::mcp::ServerDef>,
    echo_notes: bool,
    session_id: &str,
) {
    backend.set_sandbox(sandbox);
    backend.set_working_dir(setup.start.clone());
    backend.set_client_mcp(client_mcp);
    backend.set_echo_notes(echo_notes);
    backend.set_tool_timeouts(setup.settings.tool_timeouts);
    backend.set_web_policy(setup.settings.web.clone());
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let p = &setup.settings.provider;
    let key_var = p
        .api_key_env
        .clone()
        .or_else(|| p.kind.default_api_key_env().map(str::to_string));
    backend.set_tasks(crate::tasks::Spawner {
        exe,
        home: setup.home.root().to_path_buf(),
        project: setup.project.clone(),
        provider: p.name.clone(),
        model: p.model.clone(),
        base_url: p.base_url.clone(),
        key: key_var.zip(p.api_key.clone()),
        session_id: session_id.to_string(),
        depth: crate::tasks::depth_from_env(),
        drain_ms: setup.settings.limits.drain_timeout_ms,
        policy: backend.sandbox_policy(),
        progress: Default::default(),
    });
}

/// Checkpoints for this session: the backend takes them, old ones are collected on a thread of
/// their own; the last turn the checkpoint log knows (turns are numbered on from it).
fn start_checkpoints(
    backend: &mut Backend,
    project: &crate::checkpoint::Project,
    setup: &Setup,
    session_id: &str,
) -> Result<u64, OpenError> {
    backend
        .set_checkpoints(project.clone())
        .map_err(OpenError::new)?;
    let logged = crate::checkpoint::undo::entries(project, session_id)
        .map(|entries| entries.iter().map(|e| e.turn()).max().unwrap_or(0))
        .unwrap_or(0);
    let home = setup.home.root().to_path_buf();
    let max_age_ms = setup.settings.checkpoints.max_age_ms;
    let _ = std::thread::Builder::new()
        .name("checkpoint-gc".into())
        .spawn(move || crate::checkpoint::gc::auto(&home, max_age_ms));
    Ok(logged)
}

/// The writer of a new session `session_id` whose record starts with a copy of `history` (a
/// fork): header, then one `message` record each, made durable and indexed at once.
fn fork_writer(
    state: &ProjectState,
    session_id: &str,
    project: &str,
    freeze: &Freeze,
    history: &[openmax_core::conversation::Message],
) -> Result<SessionWriter, String> {
    let header = Record::Session {
        session_id: session_id.to_string(),
        project: project.to_string(),
        system: freeze.system.clone(),
        tools: freeze.tools.clone(),
    };
    let mut w =
        SessionWriter::create_unsettled(state, session_id, header).map_err(|e| e.to_string())?;
    let records: Vec<Record> = history
        .iter()
        .map(|m| Record::Message { message: m.clone() })
        .collect();
    w.settle().map_err(|e| e.to_string())?;
    w.append(&records).map_err(|e| e.to_string())?;
    Ok(w)
}

/// A resumed session offers the tools it recorded (a change since then is picked up by
/// `reload`, with its receipt). The client's MCP servers (ACP `session/load` `mcpServers`) are
/// given for this opening, so their tools are offered too, each replacing a recorded tool of
/// the same name.
fn with_client_tools(
    mut tools: Vec<openmax_core::conversation::ToolSchema>,
    mcp: &crate::mcp::McpSet,
    client: &[crate::mcp::ServerDef],
) -> Vec<openmax_core::conversation::ToolSchema> {
    for server in mcp.servers.iter().filter(|s| client.contains(&s.def)) {
        for t in &server.tools {
            let schema = t.schema();
            match tools.iter_mut().find(|x| x.name == schema.name) {
                Some(x) => *x = schema,
                None => tools.push(schema),
            }
        }
    }
    tools
}
