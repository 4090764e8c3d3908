//! The one-shot actions that open no session: `openmax mcp list`, `openmax sessions` (and
//! `repair`), `openmax sandbox check`, and the human's `--trust` and `--approve`.

use std::path::Path;

use openmax_core::wire::Mode;

use super::cli::Cli;
use super::fail;
use crate::config;
use crate::mcp::StartContext;
use crate::run::backend;
use crate::session::{Home, ProjectState};
use crate::start::project_of;

/// The project's state for a command only a human may run (`--trust`, `--approve`): refused
/// when agent-spawned, else the project discovered and its state opened.
pub(super) fn human_project_state(cli: &Cli, flag: &str) -> Result<ProjectState, String> {
    crate::human::check(flag)?;
    let project = project_of(&cli.flags())?;
    let home = Home::from_env()?;
    let state = ProjectState::open(&home, &project);
    crate::session::perms::check(home.root(), Some(state.dir()))?;
    Ok(state)
}

/// `openmax mcp list`: start the servers as a session would, print them, stop them.
pub(super) fn mcp_list(cli: &Cli) -> i32 {
    let run = || -> Result<i32, String> {
        let home = Home::from_env()?;
        let project = project_of(&cli.flags())?;
        let layers = config::load_layers(home.root(), &project).map_err(|e| e.0)?;
        let state = ProjectState::open(&home, &project);
        let mode = state.mode().unwrap_or(Mode::Ask);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("could not start the runtime: {e}"))?;
        let policy = crate::sandbox::Policy {
            running_dir: Some(state.dir().join("running")),
            confine: crate::start::session_confine(&layers.merged.sandbox, &state, home.root())?,
            protected: crate::start::protected_entries(&layers.merged.sandbox),
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
pub(super) fn sessions_list(cli: &Cli, json: bool, all: bool) -> i32 {
    let run = || -> Result<i32, String> {
        let home = Home::from_env()?;
        let states = if all {
            crate::session::list::all_projects(&home)
        } else {
            vec![ProjectState::open(&home, &project_of(&cli.flags())?)]
        };
        crate::session::list::print(&states, json, all, &mut std::io::stdout().lock())
    };
    match run() {
        Ok(code) => code,
        Err(e) => fail(e),
    }
}

/// `openmax sessions repair`: rebuild this project's session index from its records.
pub(super) fn sessions_repair(cli: &Cli) -> i32 {
    let run = || -> Result<i32, String> {
        let home = Home::from_env()?;
        let state = ProjectState::open(&home, &project_of(&cli.flags())?);
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
pub(super) fn sandbox_check(cli: &Cli) -> i32 {
    let run = || -> Result<i32, String> {
        let home = Home::from_env()?;
        let project = project_of(&cli.flags())?;
        let state = ProjectState::open(&home, &project);
        crate::session::perms::check(home.root(), Some(state.dir()))?;
        let layers = config::load_layers(home.root(), &project).map_err(|e| e.0)?;
        let sandbox = &layers.merged.sandbox;
        let confine = crate::start::session_confine(sandbox, &state, home.root())?;
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

pub(super) fn trust(cli: &Cli) -> i32 {
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

pub(super) fn approve(cli: &Cli, path: &Path) -> i32 {
    let state = match human_project_state(cli, "--approve") {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    let home = match Home::from_env() {
        Ok(h) => h,
        Err(e) => return fail(e),
    };
    crate::approvals::approve::approve_path(
        home.root(),
        &state,
        path,
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    )
}
