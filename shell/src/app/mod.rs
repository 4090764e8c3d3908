//! What one invocation of `openmax` does, from parsed flags to an exit code: the one-shot
//! actions (`--check`, `--spec`, `--trust`, `--approve`) and the session start-up shared by
//! `--stdio`, `-p`, the terminal UI and `--acp` ([`open`]: project, config, trust and mode,
//! MCP servers, freeze, session file, backend and core), which then hands over to
//! [`crate::run`] (and [`crate::tui`], [`crate::acp`]).
//!
//! Invariants:
//! - Every failure before the handshake is one clear stderr line and a nonzero exit, and nothing
//!   is written to stdout.
//! - `hello` is the first stdout line, written before stdin is read; `transcript` follows it
//!   only for `--continue`.
//! - Only a human can trust a project or approve a source ([`crate::human::check`]: no
//!   `OPENMAX_AGENT_SESSION`, a terminal on stdin, no openmax ancestor).
//! - A session's openmax is a child subreaper; what a SIGKILLed openmax left of its tool calls
//!   in the project is killed before the session starts, and no descendant outlives the exit.

pub mod cli;
pub mod demo;
pub mod print;
pub mod project;
pub mod undo;

use std::path::{Path, PathBuf};

use openmax_core::machine::CoreConfig;
use openmax_core::record::Record;
use openmax_core::wire::{Hello, Mode};
use openmax_core::Core;
use sha2::{Digest, Sha256};

use crate::config::{self, Overrides, Settings};
use crate::frontend::JsonlSink;
use crate::mcp::StartContext;
use crate::run::backend::{self, Backend};
use crate::run::{Runtime, SignalPolicy};
use crate::session::{resume_latest, Home, ProjectState, SessionWriter};
use cli::{Action, Cli};

pub use crate::sandbox::AGENT_ENV;

/// Run the invocation; returns the process exit code.
pub fn run(cli: Cli) -> i32 {
    let action = match cli.action() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("openmax: {e} (see openmax --help)");
            return crate::exit::USAGE;
        }
    };
    match action {
        Action::Check => {
            crate::oneshot::check::run(std::io::stdin().lock(), std::io::stdout().lock())
        }
        Action::Spec { json } => crate::oneshot::spec::run(json, std::io::stdout().lock()),
        Action::Trust => trust(&cli),
        Action::McpList => mcp_list(&cli),
        Action::SandboxCheck => sandbox_check(&cli),
        Action::Undo(args) => undo::run(&cli, args),
        Action::Approve { path } => approve(&cli, &path),
        Action::Stdio { pick } => session(&cli, Front::Stdio, pick),
        Action::Acp => crate::acp::run(cli),
        Action::Print { prompt, pick, opts } => print::run(&cli, &prompt, pick, &opts),
        Action::Sessions { json, all } => sessions_list(&cli, json, all),
        Action::SessionsRepair => sessions_repair(&cli),
        Action::Tui { pick } => {
            use std::io::IsTerminal;
            if !(std::io::stdin().is_terminal() && std::io::stdout().is_terminal()) {
                return fail(
                    "no terminal on stdin and stdout for the interactive UI: use --stdio for \
                     the JSONL protocol or -p PROMPT for one turn (see --help)",
                );
            }
            session(&cli, Front::Tui, pick)
        }
    }
}

/// Which frontend a session runs under (`-p` runs in [`print`]).
enum Front {
    Stdio,
    Tui,
}

/// Whether this process was started by an agent.
pub fn agent_spawned() -> bool {
    std::env::var_os(AGENT_ENV).is_some()
}

fn fail(msg: impl std::fmt::Display) -> i32 {
    eprintln!("openmax: {msg}");
    1
}

fn project_of(cli: &Cli) -> Result<PathBuf, String> {
    project::discover(&start_of(cli)?).map_err(|e| e.to_string())
}

/// Where the session starts: `--project DIR`, else the working directory.
fn start_of(cli: &Cli) -> Result<PathBuf, String> {
    match &cli.project {
        Some(p) => Ok(p.clone()),
        None => std::env::current_dir().map_err(|e| format!("working directory: {e}")),
    }
}

/// The project's state for a command only a human may run (`--trust`, `--approve`): refused
/// when agent-spawned, else the project discovered and its state opened.
fn human_project_state(cli: &Cli, flag: &str) -> Result<ProjectState, String> {
    crate::human::check(flag)?;
    let project = project_of(cli)?;
    let home = Home::from_env()?;
    let state = ProjectState::open(&home, &project);
    crate::session::perms::check(home.root(), Some(state.dir()))?;
    Ok(state)
}

/// `openmax mcp list`: start the servers as a session would, print them, stop them.
fn mcp_list(cli: &Cli) -> i32 {
    let run = || -> Result<i32, String> {
        let home = Home::from_env()?;
        let project = project_of(cli)?;
        let layers = config::load_layers(home.root(), &project).map_err(|e| e.0)?;
        let state = ProjectState::open(&home, &project);
        let mode = state.mode().unwrap_or(Mode::Ask);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("could not start the runtime: {e}"))?;
        let policy = crate::sandbox::Policy {
            running_dir: Some(state.dir().join("running")),
            confine: session_confine(&layers.merged.sandbox, &state, home.root())?,
            protected: protected_entries(&layers.merged.sandbox),
            ..Default::default()
        };
        let ctx = StartContext {
            project: state.project().to_path_buf(),
            log_path: None,
            agent_session: format!("mcp-list-{}", std::process::id()),
            notices: None,
            policy,
        };
        let set = rt.block_on(backend::start_mcp(&layers.mcp, &state, mode, ctx, &[]));
        let code = crate::mcp::list::print(&set, std::io::stdout().lock());
        drop(set);
        rt.shutdown_background();
        Ok(code)
    };
    match run() {
        Ok(code) => code,
        Err(e) => fail(e),
    }
}

/// `openmax sessions [--json] [--all]`: the sessions, newest use first.
fn sessions_list(cli: &Cli, json: bool, all: bool) -> i32 {
    let run = || -> Result<i32, String> {
        let home = Home::from_env()?;
        let states = if all {
            crate::session::list::all_projects(&home)
        } else {
            vec![ProjectState::open(&home, &project_of(cli)?)]
        };
        crate::session::list::print(&states, json, all, &mut std::io::stdout().lock())
    };
    match run() {
        Ok(code) => code,
        Err(e) => fail(e),
    }
}

/// `openmax sessions repair`: rebuild this project's session index from its records.
fn sessions_repair(cli: &Cli) -> i32 {
    let run = || -> Result<i32, String> {
        let home = Home::from_env()?;
        let state = ProjectState::open(&home, &project_of(cli)?);
        crate::session::perms::check(home.root(), Some(state.dir()))?;
        let report = crate::session::rebuild::repair(&state.sessions_dir())
            .map_err(|e| format!("could not repair the session index: {e}"))?;
        println!("{report}");
        Ok(0)
    };
    match run() {
        Ok(code) => code,
        Err(e) => fail(e),
    }
}

/// `openmax sandbox check`: build this project's sandbox once, run nothing in it, and print
/// which layers are in force (exit 0) or what is missing (exit 1).
fn sandbox_check(cli: &Cli) -> i32 {
    let run = || -> Result<i32, String> {
        let home = Home::from_env()?;
        let project = project_of(cli)?;
        let state = ProjectState::open(&home, &project);
        crate::session::perms::check(home.root(), Some(state.dir()))?;
        let layers = config::load_layers(home.root(), &project).map_err(|e| e.0)?;
        let sandbox = &layers.merged.sandbox;
        let confine = session_confine(sandbox, &state, home.root())?;
        let env = crate::sandbox::EnvPolicy {
            allow: sandbox.env_allow.clone(),
            deny: sandbox.env_deny.clone(),
            ..Default::default()
        };
        Ok(crate::sandbox::check::print(
            &confine,
            &env,
            state.project(),
            &mut std::io::stdout().lock(),
        ))
    };
    match run() {
        Ok(code) => code,
        Err(e) => fail(e),
    }
}

fn trust(cli: &Cli) -> i32 {
    let state = match human_project_state(cli, "--trust") {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    let project = state.project().to_path_buf();
    if state.trusted() {
        println!(
            "{} was already trusted (state in {})",
            project.display(),
            state.dir().display()
        );
        return 0;
    }
    match state.set_trusted() {
        Ok(()) => {
            println!(
                "trusted {}: openmax sessions may now run tools in it (recorded in {})",
                project.display(),
                state.dir().display()
            );
            0
        }
        Err(e) => fail(format!("could not trust {}: {e}", project.display())),
    }
}

fn approve(cli: &Cli, path: &Path) -> i32 {
    let state = match human_project_state(cli, "--approve") {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    let home = match Home::from_env() {
        Ok(h) => h,
        Err(e) => return fail(e),
    };
    crate::extensions::approve::approve_path(
        home.root(),
        &state,
        path,
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    )
}

/// Where a session runs and with what settings.
struct Setup {
    home: Home,
    project: PathBuf,
    /// The directory the session was started in (canonical), inside `project`.
    start: PathBuf,
    settings: Settings,
    /// A scratch demo project: trusted, mode given.
    demo: Option<Mode>,
}

fn setup(cli: &Cli, print: bool) -> Result<Setup, String> {
    let env = |k: &str| crate::sandbox::scrub::var(k);
    let env_over = Overrides::from_env(&env);
    let flags = Overrides {
        provider: cli.provider.clone(),
        model: cli.model.clone(),
        base_url: cli.base_url.clone(),
    };
    let wants_demo = flags.provider.as_deref().or(env_over.provider.as_deref()) == Some("demo");
    let (home, project, demo) = if wants_demo && cli.project.is_none() {
        let dirs = demo::create().map_err(|e| format!("could not create the demo project: {e}"))?;
        eprintln!("openmax: demo project at {}", dirs.project.display());
        let mode = if print { Mode::Auto } else { Mode::Ask };
        (Home::new(dirs.home), dirs.project, Some(mode))
    } else {
        (Home::from_env()?, project_of(cli)?, None)
    };
    let layers = config::load_layers(home.root(), &project).map_err(|e| e.0)?;
    let settings = config::resolve(layers, &env_over, &flags, &env).map_err(|e| e.0)?;
    for n in &settings.notices {
        eprintln!("openmax: {n}");
    }
    if demo.is_some() {
        ProjectState::open(&home, &project)
            .set_trusted()
            .map_err(|e| format!("could not trust the demo project: {e}"))?;
    }
    let start = match demo {
        Some(_) => project.clone(),
        None => std::fs::canonicalize(start_of(cli)?).unwrap_or_else(|_| project.clone()),
    };
    Ok(Setup {
        home,
        project,
        start,
        settings,
        demo,
    })
}

/// Settings for a session in the given project directory (ACP's `cwd`): no scratch demo
/// project, the project discovered from `dir` as from a working directory.
fn setup_at(cli: &Cli, dir: &Path) -> Result<Setup, String> {
    let env = |k: &str| crate::sandbox::scrub::var(k);
    let env_over = Overrides::from_env(&env);
    let flags = Overrides {
        provider: cli.provider.clone(),
        model: cli.model.clone(),
        base_url: cli.base_url.clone(),
    };
    let home = Home::from_env()?;
    let project = project::discover(dir).map_err(|e| e.to_string())?;
    let layers = config::load_layers(home.root(), &project).map_err(|e| e.0)?;
    let settings = config::resolve(layers, &env_over, &flags, &env).map_err(|e| e.0)?;
    for n in &settings.notices {
        eprintln!("openmax: {n}");
    }
    Ok(Setup {
        home,
        start: std::fs::canonicalize(dir).unwrap_or_else(|_| project.clone()),
        project,
        settings,
        demo: None,
    })
}

/// The policy agent processes of this session run under.
fn sandbox_policy(
    settings: &Settings,
    state: &ProjectState,
    home: &Path,
) -> Result<crate::sandbox::Policy, String> {
    let p = &settings.provider;
    let mut key_vars: Vec<String> = p.api_key_env.iter().cloned().collect();
    key_vars.extend(p.kind.default_api_key_env().map(str::to_string));
    Ok(crate::sandbox::Policy {
        env: crate::sandbox::EnvPolicy {
            key_vars,
            allow: settings.sandbox.env_allow.clone(),
            deny: settings.sandbox.env_deny.clone(),
        },
        secrets: p.api_key.iter().cloned().collect(),
        running_dir: Some(state.dir().join("running")),
        confine: session_confine(&settings.sandbox, state, home)?,
        protected: protected_entries(&settings.sandbox),
    })
}

/// `[sandbox] protected`, or the default entries.
fn protected_entries(sandbox: &crate::config::SandboxSection) -> Vec<String> {
    sandbox
        .protected
        .clone()
        .unwrap_or_else(crate::sandbox::protect::default_entries)
}

/// The kernel sandbox of this project's agent processes, from `[sandbox]`.
fn session_confine(
    sandbox: &crate::config::SandboxSection,
    state: &ProjectState,
    home: &Path,
) -> Result<crate::sandbox::confine::Confine, String> {
    crate::sandbox::confine::Confine::for_session(&sandbox_settings(sandbox), state.project(), home)
}

/// `[sandbox]` as the sandbox takes it.
fn sandbox_settings(sandbox: &crate::config::SandboxSection) -> crate::sandbox::confine::Settings {
    crate::sandbox::confine::Settings {
        mode: sandbox.mode.clone(),
        network: sandbox.network.unwrap_or(false),
        writable: sandbox.writable.clone(),
        protected: sandbox.protected.clone(),
        unix_sockets: sandbox.unix_sockets.clone().unwrap_or_default(),
    }
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
    /// Notices of the MCP servers' start and life, for [`Runtime::forward_notices`].
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

/// Open a session: settings, provider, the sandbox set-up, the session to resume, trust and
/// mode, the MCP servers, the freeze, the session file, the backend and the core. `project`
/// overrides the discovered project (ACP's `cwd`); `opener` says which frontend opens it;
/// `client_mcp` are the client's MCP servers (ACP's `mcpServers`), started with the
/// configured ones. Runs on the session's runtime: the MCP servers' connections live on it.
pub(crate) async fn open(
    cli: &Cli,
    project: Option<&Path>,
    resume: Resume,
    opener: Opener,
    client_mcp: Vec<crate::mcp::ServerDef>,
) -> Result<Opened, OpenError> {
    let print = matches!(opener, Opener::Print(_));
    // The freeze's problems also go to stderr where the client is a program.
    let echo_notes = matches!(opener, Opener::Stdio | Opener::Acp);
    let setup = match project {
        Some(p) => setup_at(cli, p),
        None => setup(cli, print),
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
    let sandbox =
        sandbox_policy(&setup.settings, &state, setup.home.root()).map_err(OpenError::new)?;
    // Not dumpable: no process of the same user (the agent's included) can read this
    // process's environment (the provider key) or memory through /proc or ptrace.
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
    let prompt_history = crate::tui::history::path_in(state.dir());
    let hook_configs = setup.settings.hooks.clone();
    let project = state.project().display().to_string();
    let (resumed, forked) = match resume {
        Resume::New => (None, None),
        Resume::Latest => (Some(resume_latest(&state)), None),
        Resume::Id(id) => (Some(crate::session::resume_id(&state, &id)), None),
        Resume::Prefix(p) => (
            Some(crate::session::resume::resume_prefix(&state, &p)),
            None,
        ),
        Resume::Fork(p) => (None, Some(crate::session::resume::read_copy(&state, &p))),
    };
    let resumed = taken(resumed, |r| &r.notices)?;
    let forked = taken(forked, |c| &c.notices)?;
    let session_id = resumed
        .as_ref()
        .map(|r| r.session_id.clone())
        .unwrap_or_else(new_session_id);
    let mode = setup
        .demo
        .or_else(|| state.mode())
        .or(resumed.as_ref().and_then(|r| r.mode))
        .or(forked.as_ref().and_then(|c| c.mode))
        .unwrap_or(Mode::Ask);
    // `-p --mode`: this run only; the saved mode is left as it is.
    let mode = match opener {
        Opener::Print(PrintOpen {
            mode: Some(wanted), ..
        }) => Mode::for_one_run(mode, wanted, agent_spawned()).map_err(|message| OpenError {
            code: crate::exit::NOPERM,
            message,
            untrusted: false,
        })?,
        _ => mode,
    };
    // MCP servers start concurrently before the freeze; their notices reach the core once the
    // runtime loop runs.
    let (notice_tx, notices) = tokio::sync::mpsc::unbounded_channel::<String>();
    let mcp_ctx = StartContext {
        project: state.project().to_path_buf(),
        log_path: Some(state.sessions_dir().join(format!("{session_id}.mcp.log"))),
        agent_session: session_id.clone(),
        notices: Some(notice_tx),
        policy: sandbox.clone(),
    };
    let mcp = backend::start_mcp(
        &setup.settings.mcp,
        &state,
        mode,
        mcp_ctx.clone(),
        &client_mcp,
    )
    .await;
    let (frozen, hooks) = backend::freeze_now(
        setup.home.root(),
        state.project(),
        &setup.start,
        &state,
        &hook_configs,
        &mcp,
        echo_notes,
    );
    let turns_before = resumed.as_ref().map(|r| r.turns).unwrap_or(0);
    let (writer, freeze, history, transcript) = match (resumed, forked) {
        (Some(r), _) => {
            let mut freeze = frozen.freeze.clone();
            freeze.system = r.system;
            freeze.tools = with_client_tools(r.tools, &mcp, &client_mcp);
            (r.writer, freeze, r.history, Some(r.transcript))
        }
        // A fork: a new session holding a copy of that one's history.
        (None, Some(c)) => {
            let mut freeze = frozen.freeze.clone();
            freeze.system = c.system;
            freeze.tools = with_client_tools(c.tools, &mcp, &client_mcp);
            let w = fork_writer(&state, &session_id, &project, &freeze, &c.history)
                .map_err(|e| OpenError::new(format!("could not fork session {}: {e}", c.from)))?;
            let mut t = c.transcript;
            t.session_id = session_id.clone();
            (w, freeze, c.history, Some(t))
        }
        (None, None) => {
            let freeze = frozen.freeze.clone();
            let header = Record::Session {
                session_id: session_id.clone(),
                project: project.clone(),
                system: freeze.system.clone(),
                tools: freeze.tools.clone(),
            };
            let mut w = SessionWriter::create_unsettled(&state, &session_id, header)
                .map_err(|e| OpenError::new(format!("could not start a session: {e}")))?;
            w.discard_when_unused();
            (w, freeze, Vec::new(), None)
        }
    };
    let opened_state = state.clone();
    let caps = setup.settings.checkpoints;
    let checkpoints = caps
        .enabled
        .then(|| crate::checkpoint::Project::new(setup.home.root(), &state, caps));
    let mut backend = Backend::new(
        setup.home.clone(),
        state,
        provider,
        writer,
        &frozen,
        hooks,
        hook_configs,
        mcp,
        mcp_ctx,
        mode,
    )
    .map_err(OpenError::new)?;
    backend.set_sandbox(sandbox);
    backend.set_working_dir(setup.start.clone());
    backend.set_client_mcp(client_mcp);
    backend.set_echo_notes(echo_notes);
    backend.set_tool_timeouts(setup.settings.tool_timeouts);
    backend.set_web_policy(setup.settings.web.clone());
    let task_depth = crate::tasks::depth_from_env();
    if let Ok(exe) = std::env::current_exe() {
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
            session_id: session_id.clone(),
            depth: task_depth,
            drain_ms: setup.settings.limits.drain_timeout_ms,
            policy: backend.sandbox_policy(),
            progress: Default::default(),
        });
    }
    let mut turns_before = turns_before;
    if let Some(p) = &checkpoints {
        backend.set_checkpoints(p.clone()).map_err(OpenError::new)?;
        // Turns numbered on from the last one the record or the checkpoint log knows.
        if let Ok(entries) = crate::checkpoint::undo::entries(p, &session_id) {
            let logged = entries.iter().map(|e| e.turn()).max().unwrap_or(0);
            turns_before = turns_before.max(logged);
        }
        let home = setup.home.root().to_path_buf();
        let _ = std::thread::Builder::new()
            .name("checkpoint-gc".into())
            .spawn(move || crate::checkpoint::gc::auto(&home, caps.max_age_ms));
    }
    let mut cfg = CoreConfig::new(&session_id, freeze);
    cfg.seed = seed_of(&session_id);
    cfg.trusted = trusted;
    cfg.agent_spawned = agent_spawned();
    cfg.mode = mode;
    cfg.permissions = setup.settings.permissions.clone();
    cfg.retry = setup.settings.retry.clone();
    cfg.limits = setup.settings.limits.clone();
    cfg.context_tokens = setup.settings.context_tokens;
    cfg.history = history;
    cfg.non_interactive = print;
    cfg.driver_ends_input = matches!(opener, Opener::Print(p) if p.driver_ends_input);
    cfg.checkpoints = checkpoints.is_some();
    cfg.turns_before = turns_before;
    cfg.tasks = openmax_core::machine::TaskLimits {
        depth: task_depth,
        ..setup.settings.tasks
    };
    // A named agent's session: only its tools, and at most its tool rounds.
    if let Some(agent) = crate::tasks::inherited_agent() {
        cfg.only_tools = agent.tools.clone();
        if let Some(n) = agent.max_iterations {
            cfg.limits.max_iterations = cfg.limits.max_iterations.min(n);
        }
    }
    Ok(Opened {
        core: Core::new(cfg),
        backend,
        session_id,
        project,
        transcript,
        mode,
        model: setup.settings.provider.model.clone(),
        prices: setup.settings.provider.prices,
        prompt_history,
        notices,
        state: opened_state,
        trusted,
        home: setup.home.root().to_path_buf(),
        checkpoints,
    })
}

/// The writer of a new session `session_id` whose record starts with a copy of `history` (a
/// fork): header, then one `message` record each, made durable and indexed at once.
fn fork_writer(
    state: &ProjectState,
    session_id: &str,
    project: &str,
    freeze: &openmax_core::machine::Freeze,
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

/// The terminal UI's sessions: the one asked for, then each one picked with `/resume`, until
/// the person quits. After the terminal is given back, one line says how to come back.
fn tui_session(cli: &Cli, rt: &tokio::runtime::Runtime, mut resume: Resume) -> i32 {
    loop {
        // The start-up's stderr becomes the UI's own notice lines.
        let early = crate::tui::Early::start();
        let opened = match rt.block_on(open(cli, None, resume, Opener::Tui, Vec::new())) {
            Ok(o) => o,
            Err(e) => {
                early.abandon();
                eprintln!("openmax: {}", e.message);
                return e.code;
            }
        };
        let Opened {
            core,
            mut backend,
            session_id,
            transcript,
            mode,
            model,
            prompt_history,
            notices,
            state,
            trusted,
            home,
            checkpoints,
            prices,
            ..
        } = opened;
        if let Err(e) = backend.settle_session() {
            early.abandon();
            return fail(format!("could not start a session: {e}"));
        }
        let past = transcript.as_ref().and_then(|_| {
            crate::session::replay::read(&state.sessions_dir().join(format!("{session_id}.jsonl")))
                .ok()
        });
        let launch = crate::tui::Launch {
            model,
            mode,
            session_id: session_id.clone(),
            transcript,
            past,
            state: state.clone(),
            history: prompt_history,
            notices: Some(notices),
            home,
            provider: backend.provider().clone(),
            sandbox: backend.sandbox_policy(),
            tasks: backend.task_board(),
            trusted,
            prices,
            undo: checkpoints.map(|p| (p, session_id.clone())),
            attach: Some(crate::tui::attach::Attach {
                project: backend.project().to_path_buf(),
                mcp: backend.mcp_view(),
                runtime: rt.handle().clone(),
            }),
        };
        let ended = crate::tui::run(rt, core, backend, launch, early);
        crate::sandbox::reaper::sweep();
        match ended.next {
            Some(crate::tui::view::Next::Resume(id)) if ended.code == 0 => {
                resume = Resume::Prefix(id)
            }
            Some(crate::tui::view::Next::New) if ended.code == 0 => resume = Resume::New,
            _ => {
                let kept = crate::session::index::read_index(&state.sessions_dir())
                    .is_ok_and(|i| i.sessions.iter().any(|e| e.id == session_id && e.used()));
                if kept {
                    println!("openmax: session {session_id}; continue it with: openmax --resume {session_id}");
                }
                return ended.code;
            }
        }
    }
}

fn session(cli: &Cli, front: Front, pick: cli::Pick) -> i32 {
    let opener = match front {
        Front::Tui => Opener::Tui,
        Front::Stdio => Opener::Stdio,
    };
    let resume = match pick {
        cli::Pick::New => Resume::New,
        cli::Pick::Latest => Resume::Latest,
        cli::Pick::Resume(id) => Resume::Prefix(id),
        cli::Pick::Fork(id) => Resume::Fork(id),
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(format!("could not start the runtime: {e}")),
    };
    if matches!(front, Front::Tui) {
        let code = tui_session(cli, &rt, resume);
        rt.shutdown_background();
        crate::sandbox::reaper::sweep();
        return code;
    }
    let Opened {
        core,
        mut backend,
        session_id,
        project,
        transcript,
        notices,
        ..
    } = match rt.block_on(open(cli, None, resume, opener, Vec::new())) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("openmax: {}", e.message);
            return e.code;
        }
    };

    match front {
        Front::Tui => unreachable!("the terminal UI runs in tui_session"),
        Front::Stdio => {
            let mut sink = JsonlSink::new(&session_id, std::io::stdout());
            let hello = Hello::new(
                &session_id,
                env!("CARGO_PKG_VERSION"),
                &project,
                transcript.is_some(),
            );
            sink.raw_line(&hello.to_json());
            if let Some(t) = &transcript {
                sink.raw_line(&t.to_json());
            }
            // The header's flushes and the index update wait until `hello` is out: the first
            // line does not need them, and nothing reported finished depends on them.
            if let Err(e) = backend.settle_session() {
                eprintln!("openmax: could not start a session: {e}");
                return 1;
            }
            let mut runtime = Runtime::new(core, backend, sink);
            runtime.forward_notices(notices);
            runtime.handle_signals(SignalPolicy::EndInput);
            let tx = runtime.sender();
            std::thread::spawn(move || {
                crate::frontend::framing::pump(std::io::stdin().lock(), |input| {
                    tx.send(input).is_ok()
                })
            });
            let (code, _sink) = rt.block_on(runtime.run());
            rt.shutdown_background();
            crate::sandbox::reaper::sweep();
            code
        }
    }
}
