//! The kernel sandbox of a session's agent processes, as openmax decides it: whether there is
//! one ([`Confine`]), what it allows ([`ConfineSpec`]), and how a process is started in it:
//! through the sandbox helper, openmax itself re-executed as
//! `openmax --sandbox-exec SPEC -- PROGRAM ARGS…` ([`super::helper`]), which builds the
//! namespaces, the view, the filters and the connect broker, and runs PROGRAM inside.
//!
//! Invariants:
//! - `$OPENMAX_HOME` is never writable: [`ConfineSpec::new`] refuses a layout where the project
//!   contains it (or it the project), [`ConfineSpec::allow_write`] a writable directory that
//!   does.
//! - Fail closed: without Landlock, without namespaces, or when the helper's first build (the
//!   probe a session makes before its first agent process) fails, every agent process is
//!   refused with a message starting with [`UNAVAILABLE`] that says what is missing and how
//!   a human can turn the sandbox off in the user config. Nothing runs unconfined unless a
//!   human allowed it (`[sandbox] mode = "off"`, or an approved escalation).
//! - The session's private temp directory (`TMPDIR` inside, shown at `/tmp`) lives as long as
//!   the session's [`Confine`] and is removed with it, or at the process's exit
//!   ([`super::temps`]).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};

use openmax_core::tool::RunSandbox;

use super::helper::{self, Report};
use super::spec::{no_landlock, ConfineSpec, UNAVAILABLE};

/// The sandbox of one session: its specification, the helper to start, its private temp
/// directory (removed on drop) and the result of its first build.
#[derive(Debug)]
pub struct Sandbox {
    pub spec: ConfineSpec,
    /// The helper program: this very binary (`/proc/self/exe`, even if it was replaced on disk).
    pub helper: PathBuf,
    probed: OnceLock<Result<Report, String>>,
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        super::temps::remove(&self.spec.tmp);
    }
}

impl Sandbox {
    /// The helper's report on a build of this sandbox with nothing run in it (made once, at the
    /// first agent process); the error says what is missing.
    pub fn probe(&self) -> Result<&Report, String> {
        self.probed
            .get_or_init(|| probe(&self.helper, &self.spec))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// A command that runs `program` in this sandbox (read-only when `read_only`).
    fn command(&self, program: &str, read_only: bool) -> Result<Command, String> {
        self.probe()?;
        let spec = if read_only {
            self.spec.read_only()
        } else {
            self.spec.clone()
        };
        let mut cmd = helper_command(&self.helper, spec)?;
        cmd.arg("--").arg(program);
        Ok(cmd)
    }
}

/// `helper --sandbox-exec SPEC`, holding openmax's lifeline (its descriptor written into
/// `spec`); the caller adds `--probe` or `-- PROGRAM`.
fn helper_command(helper: &Path, mut spec: ConfineSpec) -> Result<Command, String> {
    let mut cmd = Command::new(helper);
    spec.lifeline = super::lifeline::give(&mut cmd);
    let json = serde_json::to_string(&spec).map_err(|e| format!("{UNAVAILABLE}: {e}"))?;
    cmd.arg(helper::FLAG).arg(json);
    Ok(cmd)
}

/// Build `spec` with `helper --probe` and read its report.
pub fn probe(helper_bin: &Path, spec: &ConfineSpec) -> Result<Report, String> {
    let out = helper_command(helper_bin, spec.clone())?
        .arg("--probe")
        .current_dir(&spec.project)
        .env_clear()
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("{UNAVAILABLE}: the sandbox helper could not start: {e}"))?;
    if out.status.success() {
        let text = String::from_utf8_lossy(&out.stdout);
        return serde_json::from_str(text.trim())
            .map_err(|e| format!("{UNAVAILABLE}: the sandbox helper's report: {e}: {text}"));
    }
    let err = String::from_utf8_lossy(&out.stderr);
    let msg = err.trim().trim_start_matches("openmax: ");
    Err(if msg.is_empty() {
        format!(
            "{UNAVAILABLE}: the sandbox helper ended with {}",
            out.status
        )
    } else {
        msg.to_string()
    })
}

/// The kernel sandbox of a session's agent processes, decided once at start-up.
#[derive(Debug, Clone, Default)]
pub enum Confine {
    /// No kernel sandbox: `[sandbox] mode = "off"` in the user config, or a tool context built
    /// outside a session (library use and unit tests).
    #[default]
    Off,
    /// Every agent process is confined.
    On(Arc<Sandbox>),
    /// The sandbox cannot be had: every agent process is refused with this message.
    Unavailable(String),
}

impl PartialEq for Confine {
    fn eq(&self, other: &Confine) -> bool {
        match (self, other) {
            (Confine::Off, Confine::Off) => true,
            (Confine::On(a), Confine::On(b)) => Arc::ptr_eq(a, b),
            (Confine::Unavailable(a), Confine::Unavailable(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for Confine {}

/// `[sandbox]` as the user config (narrowed by the project's) says.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// `"on"` (default) or `"off"`.
    pub mode: Option<String>,
    pub network: bool,
    pub writable: Vec<String>,
    /// `None`: [`super::protect::DEFAULT`].
    pub protected: Option<Vec<String>>,
    pub unix_sockets: Vec<String>,
}

impl Confine {
    /// The sandbox for a session in `project` with state under `home`. An unknown mode or a bad
    /// entry is an error (a start-up failure); a sandbox the kernel or the layout cannot give
    /// is [`Confine::Unavailable`].
    pub fn for_session(
        settings: &Settings,
        project: &Path,
        home: &Path,
    ) -> Result<Confine, String> {
        match settings.mode.as_deref() {
            Some("off") => return Ok(Confine::Off),
            None | Some("on") => {}
            Some(other) => {
                return Err(format!(
                    "[sandbox] mode must be \"on\" or \"off\", got {other:?}"
                ))
            }
        }
        if let Some(entries) = &settings.protected {
            for e in entries {
                super::protect::check_entry(e)?;
            }
        }
        let system_tmp = std::env::temp_dir();
        super::temps::remove_orphans_once(&system_tmp);
        let tmp = match super::temps::make(&system_tmp) {
            Ok(t) => t,
            Err(e) => {
                return Ok(Confine::Unavailable(format!(
                    "{UNAVAILABLE}: cannot create the agent's temp directory under {}: {e}",
                    system_tmp.display()
                )))
            }
        };
        let built = (|| {
            let mut spec = ConfineSpec::new(project, home, &tmp, &system_tmp, settings.network)
                .map_err(|e| Ok(format!("{UNAVAILABLE}: {e}")))?;
            // The user's own configuration: a bad entry is a start-up error naming it.
            for dir in &settings.writable {
                spec.allow_write(dir, home).map_err(Err)?;
            }
            for s in &settings.unix_sockets {
                spec.allow_socket(s).map_err(Err)?;
            }
            if let Some(p) = &settings.protected {
                spec.protected = p.clone();
            }
            Ok::<_, Result<String, String>>(spec)
        })();
        let spec = match built {
            Ok(spec) => spec,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&tmp);
                return match e {
                    Ok(unavailable) => Ok(Confine::Unavailable(unavailable)),
                    Err(config) => Err(config),
                };
            }
        };
        if !spec.landlock {
            let _ = std::fs::remove_dir_all(&tmp);
            return Ok(Confine::Unavailable(no_landlock()));
        }
        Ok(Confine::On(Arc::new(Sandbox {
            spec,
            helper: PathBuf::from("/proc/self/exe"),
            probed: OnceLock::new(),
        })))
    }

    /// The same sandbox, started through `helper` instead of this binary (a bench or a test
    /// whose own executable is not openmax).
    pub fn with_helper(self, helper: &Path) -> Confine {
        match self {
            Confine::On(mut s) => {
                if let Some(inner) = Arc::get_mut(&mut s) {
                    inner.helper = helper.to_path_buf();
                }
                Confine::On(s)
            }
            other => other,
        }
    }

    /// A command for `program` in the sandbox the core chose for its call: the session's, the
    /// read-only one, or none (a human approved running it outside). An error means nothing
    /// may be started; it says why and what a human can do.
    pub fn command(&self, program: &str, how: RunSandbox) -> Result<Command, String> {
        match (self, how) {
            (_, RunSandbox::Unsandboxed) | (Confine::Off, RunSandbox::Session) => {
                Ok(Command::new(program))
            }
            (Confine::On(s), RunSandbox::Session) => s.command(program, false),
            (Confine::On(s), RunSandbox::ReadOnly) => s.command(program, true),
            (Confine::Off, RunSandbox::ReadOnly) => Err(
                "the read-only sandbox is unavailable: the user config turns the sandbox off"
                    .to_string(),
            ),
            (Confine::Unavailable(why), RunSandbox::Session | RunSandbox::ReadOnly) => {
                Err(why.clone())
            }
        }
    }

    /// `TMPDIR` for a process started with [`Confine::command`] in `how`: inside the sandbox,
    /// the directory that shows the session's private one; outside, none (openmax's own).
    pub fn tmpdir(&self, how: RunSandbox) -> Option<PathBuf> {
        match (self, how) {
            (Confine::On(s), RunSandbox::Session | RunSandbox::ReadOnly) => Some(s.spec.tmpdir()),
            _ => None,
        }
    }

    /// Whether [`RunSandbox::ReadOnly`] can be had: the sandbox is on and builds here.
    pub fn read_only_available(&self) -> bool {
        matches!(self, Confine::On(s) if s.probe().is_ok())
    }
}

#[cfg(test)]
mod tests;
