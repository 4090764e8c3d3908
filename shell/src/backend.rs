//! The effect backends the runtime drives: the provider, the tools, the session store and the
//! project state, behind one small surface so that [`crate::runtime`] stays a plain loop.
//!
//! Invariant: nothing here decides policy; each method performs one effect and reports what
//! happened. (While a sibling module is not merged yet, its entry point here answers with an
//! honest failure naming the missing piece; nothing pretends to work.)

use std::future::Future;
use std::path::{Path, PathBuf};

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use openmax_core::conversation::{ModelRequest, ToolSchema};
use openmax_core::machine::{Freeze, HookSpec, Input};
use openmax_core::provider::{RequestFailure, RequestId};
use openmax_core::record::Record;
use openmax_core::tool::{ToolOutcome, ToolPlan};
use openmax_core::wire::Mode;

use crate::config::ProviderSettings;

/// The channel every effect answers on.
pub type InputTx = mpsc::UnboundedSender<Input>;

/// Effects performed for one session.
pub struct Backend {
    pub home: PathBuf,
    pub project: PathBuf,
    provider: ProviderSettings,
    hooks: Vec<HookSpec>,
    records: Vec<Record>,
}

impl Backend {
    pub fn new(
        home: &Path,
        project: &Path,
        provider: ProviderSettings,
        hooks: Vec<HookSpec>,
    ) -> Result<Backend, String> {
        Ok(Backend {
            home: home.to_path_buf(),
            project: project.to_path_buf(),
            provider,
            hooks,
            records: Vec::new(),
        })
    }

    /// Start one attempt of a model request; its items and failures arrive on `tx`.
    pub fn spawn_request(
        &self,
        request: RequestId,
        attempt: u32,
        _body: ModelRequest,
        tx: InputTx,
    ) -> JoinHandle<()> {
        let name = self.provider.name.clone();
        tokio::spawn(async move {
            let _ = tx.send(Input::RequestFailed {
                request,
                attempt,
                failure: RequestFailure::Unreachable {
                    detail: format!("provider {name} is not built into this binary yet"),
                },
            });
        })
    }

    /// A blocking job that inspects a tool call.
    pub fn plan_job(
        &self,
        name: String,
        _args: serde_json::Value,
    ) -> impl FnOnce() -> ToolPlan + Send + 'static {
        move || ToolPlan {
            mutating: false,
            targets: vec![name.clone()],
            summary: name.clone(),
            detail: String::new(),
            source: None,
            invalid: Some(format!("tool {name} is not built into this binary yet")),
        }
    }

    /// A future that runs a tool call until done or `cancel` fires.
    pub fn run_job(
        &self,
        name: String,
        _args: serde_json::Value,
        _cancel: oneshot::Receiver<()>,
    ) -> impl Future<Output = ToolOutcome> + Send + 'static {
        async move {
            ToolOutcome {
                ok: false,
                output: format!("tool {name} is not built into this binary yet"),
                diffs: Vec::new(),
            }
        }
    }

    /// Append records to the session file.
    pub fn persist(&mut self, records: Vec<Record>) -> Result<(), String> {
        self.records.extend(records);
        Err("the session store is not built into this binary yet".into())
    }

    /// Save the approval mode for the project.
    pub fn save_mode(&self, _mode: Mode) -> Result<(), String> {
        Err("the project state store is not built into this binary yet".into())
    }

    /// Record a human's approval of a source's bytes.
    pub fn approve_source(&self, _source_path: &str, _source_sha: &str) -> Result<(), String> {
        Err("the project state store is not built into this binary yet".into())
    }

    /// Whether any hook is configured.
    pub fn has_hooks(&self) -> bool {
        !self.hooks.is_empty()
    }

    /// Read the prompt, tools and hooks (session start and `reload`).
    pub fn freeze(&self) -> Freeze {
        Freeze {
            system: crate::prompt::system_prompt(&self.home, &self.project),
            tools: builtin_schemas(),
            skills: Vec::new(),
            hooks: self.hooks.clone(),
            changes: Vec::new(),
            notes: Vec::new(),
        }
    }
}

/// The built-in tools' schemas.
pub fn builtin_schemas() -> Vec<ToolSchema> {
    Vec::new()
}

/// `$OPENMAX_HOME`, else `~/.openmax`.
pub fn home_from_env() -> Result<PathBuf, String> {
    if let Some(h) = std::env::var_os("OPENMAX_HOME").filter(|h| !h.is_empty()) {
        return Ok(PathBuf::from(h));
    }
    match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        Some(h) => Ok(PathBuf::from(h).join(".openmax")),
        None => Err("neither OPENMAX_HOME nor HOME is set: set OPENMAX_HOME".into()),
    }
}

/// The project's saved trust and mode.
pub fn project_state(_home: &Path, _project: &Path) -> (bool, Option<Mode>) {
    (false, None)
}

/// Mark the project trusted; returns the state directory it was recorded in.
pub fn set_trusted(_home: &Path, _project: &Path) -> Result<PathBuf, String> {
    Err("the project state store is not built into this binary yet".into())
}
