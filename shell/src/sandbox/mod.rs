//! The one place where openmax prepares a process it starts on the agent's behalf (the `shell`
//! tool, external tools, project hooks, project MCP servers): its environment ([`env`]), its
//! kernel sandbox ([`confine`], run by the [`helper`]), what in the project it may not change
//! ([`protect`]) and its containment ([`reaper`]).
//!
//! Invariants:
//! - Every agent process is built through [`Policy::command`] (std) or
//!   [`Policy::tokio_command`], so no caller can forget a part of the policy.
//! - The provider key's value never leaves openmax in tool output: [`Policy::redact`] is
//!   applied to every tool outcome and hook detail before it is persisted or sent.

pub mod check;
pub mod confine;
pub mod env;
pub mod helper;
pub mod lifeline;
pub mod protect;
pub mod reaper;
pub mod scrub;
pub mod spec;
pub mod temps;

use std::path::{Path, PathBuf};

use openmax_core::tool::RunSandbox;

pub use env::EnvPolicy;

use crate::human::AGENT_ENV;

/// What every agent process runs under, from the user config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub env: EnvPolicy,
    /// Values redacted from tool output (the provider key).
    pub secrets: Vec<String>,
    /// Where running calls' process groups are recorded (`<project state>/running`).
    pub running_dir: Option<PathBuf>,
    /// The kernel sandbox every agent process starts in.
    pub confine: confine::Confine,
    /// The entries of the project nothing the agent runs may change (`[sandbox] protected`):
    /// held read-only by the sandbox, refused by `write_file` and `edit_file`.
    pub protected: Vec<String>,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            env: EnvPolicy::default(),
            secrets: Vec::new(),
            running_dir: None,
            confine: confine::Confine::Off,
            protected: protect::default_entries(),
        }
    }
}

impl Policy {
    /// The environment of an agent process that inherits openmax's own (the `shell` tool and
    /// hooks): openmax's variables minus what [`EnvPolicy`] withholds, plus this session's
    /// [`AGENT_ENV`].
    pub fn inherited_env(&self, agent_session: &str) -> Vec<(String, String)> {
        let mut vars = self.env.filter(std::env::vars());
        vars.push((AGENT_ENV.to_string(), agent_session.to_string()));
        vars
    }

    /// The environment of an external tool: only `names` (its base set and the grant a human
    /// approved), never the provider key or openmax's own variables, plus [`AGENT_ENV`].
    pub fn granted_env<'a>(
        &self,
        names: impl IntoIterator<Item = &'a str>,
        agent_session: &str,
    ) -> Vec<(String, String)> {
        let mut vars = Vec::new();
        for name in names {
            if env::NEVER.contains(&name) || self.env.key_vars.iter().any(|k| k == name) {
                continue;
            }
            if let Ok(v) = std::env::var(name) {
                vars.push((name.to_string(), v));
            }
        }
        vars.push((AGENT_ENV.to_string(), agent_session.to_string()));
        vars
    }

    /// A `std` command for `program` in `cwd` with a cleared environment set to `vars`, in
    /// the session's kernel sandbox. An error (the sandbox is unavailable) means nothing may
    /// be started; the message says why and what a human can do.
    pub fn command(
        &self,
        program: &str,
        cwd: &Path,
        vars: &[(String, String)],
    ) -> Result<std::process::Command, String> {
        self.command_as(program, cwd, vars, RunSandbox::Session)
    }

    /// [`Policy::command`] in the sandbox the core chose for a call (the `shell` tool's
    /// read-only and unsandboxed runs); the environment is filtered the same way in all three.
    pub fn command_as(
        &self,
        program: &str,
        cwd: &Path,
        vars: &[(String, String)],
        how: RunSandbox,
    ) -> Result<std::process::Command, String> {
        let mut cmd = self.confine.command(program, how)?;
        cmd.current_dir(cwd)
            .env_clear()
            .envs(vars.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        if let Some(tmp) = self.confine.tmpdir(how) {
            cmd.env("TMPDIR", tmp);
        }
        Ok(cmd)
    }

    /// The same as a tokio command.
    pub fn tokio_command(
        &self,
        program: &str,
        cwd: &Path,
        vars: &[(String, String)],
    ) -> Result<tokio::process::Command, String> {
        self.command(program, cwd, vars)
            .map(tokio::process::Command::from)
    }

    /// Whether `write_file` / `edit_file` must refuse `path` (absolute, resolved inside
    /// `project`): a protected entry, or beneath one.
    pub fn protects(&self, project: &Path, path: &Path) -> bool {
        protect::refuses(project, &self.protected, path)
    }

    /// The same policy without the kernel sandbox, for the user's own code (user hooks).
    pub fn unconfined(&self) -> Policy {
        Policy {
            confine: confine::Confine::Off,
            ..self.clone()
        }
    }

    /// Track a group just spawned for a call until the returned guard is dropped.
    pub fn track(&self, pgid: i32) -> reaper::Tracked {
        reaper::track(pgid, self.running_dir.as_deref())
    }

    /// `text` with every secret value replaced by `[redacted]`.
    pub fn redact(&self, text: &str) -> String {
        env::redact(text, &self.secrets)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_redacts_its_own_secrets_and_keeps_the_rest() {
        let p = Policy {
            secrets: vec!["sk-live-0123".into()],
            ..Policy::default()
        };
        assert_eq!(p.redact("key sk-live-0123, kept"), "key [redacted], kept");
        assert_eq!(
            p.unconfined().redact("key sk-live-0123, kept"),
            "key [redacted], kept"
        );
        assert_eq!(Policy::default().redact("sk-live-0123"), "sk-live-0123");
    }

    /// The user's own code (user hooks) runs outside the kernel sandbox under the same
    /// secrets, environment rules, running directory and protected entries: only the sandbox
    /// changes.
    #[test]
    fn unconfined_turns_off_the_kernel_sandbox_and_nothing_else() {
        let p = Policy {
            secrets: vec!["sk-live-0123".into()],
            running_dir: Some(PathBuf::from("/state/running")),
            confine: confine::Confine::Unavailable("no sandbox here".into()),
            protected: vec![".git".into()],
            ..Policy::default()
        };
        let u = p.unconfined();
        assert_eq!(u.confine, confine::Confine::Off);
        assert_eq!(
            u,
            Policy {
                confine: confine::Confine::Off,
                ..p
            }
        );
    }

    #[test]
    fn an_external_tool_gets_the_variables_named_that_are_set_and_never_a_key() {
        // `HOME` stands for the provider key's variable here: set, named, and still withheld.
        let p = Policy {
            env: EnvPolicy {
                key_vars: vec!["HOME".into()],
                ..EnvPolicy::default()
            },
            ..Policy::default()
        };
        let path = std::env::var("PATH").expect("PATH is set");
        assert!(std::env::var("HOME").is_ok(), "HOME is set");
        assert_eq!(
            p.granted_env(["PATH", "HOME", "OPENMAX_TEST_SURELY_UNSET"], "s-1"),
            vec![
                ("PATH".to_string(), path),
                (AGENT_ENV.to_string(), "s-1".to_string())
            ]
        );
        assert_eq!(
            p.granted_env([], "s-2"),
            vec![(AGENT_ENV.to_string(), "s-2".to_string())]
        );
    }
}
