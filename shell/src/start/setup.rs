//! Where a session runs and with what settings: the project (discovered from `--project` or
//! the working directory, or a scratch demo project), the resolved config layers, and the
//! sandbox policy its agent processes run under.

use std::path::{Path, PathBuf};

use openmax_core::wire::Mode;

use super::{demo, project, Flags};
use crate::config::{self, Overrides, Settings};
use crate::session::{Home, ProjectState};

/// Where a session runs and with what settings.
pub(crate) struct Setup {
    pub home: Home,
    pub project: PathBuf,
    /// The directory the session was started in (canonical), inside `project`.
    pub start: PathBuf,
    pub settings: Settings,
    /// A scratch demo project: trusted, mode given.
    pub demo: Option<Mode>,
}

/// The project for these flags: discovered from `--project`, else the working directory.
pub fn project_of(flags: &Flags) -> Result<PathBuf, String> {
    project::discover(&start_of(flags)?).map_err(|e| e.to_string())
}

/// Where the session starts: `--project DIR`, else the working directory.
fn start_of(flags: &Flags) -> Result<PathBuf, String> {
    match &flags.project {
        Some(p) => Ok(p.clone()),
        None => std::env::current_dir().map_err(|e| format!("working directory: {e}")),
    }
}

/// The config layers resolved against the environment and the provider flags; the notices go
/// to stderr.
fn settings_for(flags: &Flags, home: &Home, project: &Path) -> Result<Settings, String> {
    let env = |k: &str| crate::sandbox::scrub::var(k);
    let env_over = Overrides::from_env(&env);
    let layers = config::load_layers(home.root(), project).map_err(|e| e.0)?;
    let settings = config::resolve(layers, &env_over, &flags.overrides(), &env).map_err(|e| e.0)?;
    for n in &settings.notices {
        eprintln!("openmax: {n}");
    }
    Ok(settings)
}

/// The set-up of a session started from the command line: `--provider demo` without
/// `--project` runs in a new scratch demo project (trusted; `auto` for `-p`, else `ask`).
pub(crate) fn setup(flags: &Flags, print: bool) -> Result<Setup, String> {
    let env = |k: &str| crate::sandbox::scrub::var(k);
    let env_over = Overrides::from_env(&env);
    let wants_demo = flags.provider.as_deref().or(env_over.provider.as_deref()) == Some("demo");
    let (home, project, demo) = if wants_demo && flags.project.is_none() {
        let dirs = demo::create().map_err(|e| format!("could not create the demo project: {e}"))?;
        eprintln!("openmax: demo project at {}", dirs.project.display());
        let mode = if print { Mode::Auto } else { Mode::Ask };
        (Home::new(dirs.home), dirs.project, Some(mode))
    } else {
        (Home::from_env()?, project_of(flags)?, None)
    };
    let settings = settings_for(flags, &home, &project)?;
    if demo.is_some() {
        ProjectState::open(&home, &project)
            .set_trusted()
            .map_err(|e| format!("could not trust the demo project: {e}"))?;
    }
    let start = match demo {
        Some(_) => project.clone(),
        None => std::fs::canonicalize(start_of(flags)?).unwrap_or_else(|_| project.clone()),
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
pub(crate) fn setup_at(flags: &Flags, dir: &Path) -> Result<Setup, String> {
    let home = Home::from_env()?;
    let project = project::discover(dir).map_err(|e| e.to_string())?;
    let settings = settings_for(flags, &home, &project)?;
    Ok(Setup {
        home,
        start: std::fs::canonicalize(dir).unwrap_or_else(|_| project.clone()),
        project,
        settings,
        demo: None,
    })
}

/// The policy agent processes of this session run under.
pub(crate) fn sandbox_policy(
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
pub fn protected_entries(sandbox: &crate::config::SandboxSection) -> Vec<String> {
    sandbox
        .protected
        .clone()
        .unwrap_or_else(crate::sandbox::protect::default_entries)
}

/// The kernel sandbox of this project's agent processes, from `[sandbox]`.
pub fn session_confine(
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
