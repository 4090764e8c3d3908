//! The effect backends the runtime drives: the provider, the tools, the session store and the
//! project state, behind one small surface so that [`crate::runtime`] stays a plain loop.
//!
//! Invariant: nothing here decides policy; each method performs one effect and reports what
//! happened.

use std::collections::BTreeSet;
use std::future::Future;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use openmax_core::conversation::ModelRequest;
use openmax_core::machine::{Freeze, HookSpec, Input};
use openmax_core::provider::RequestId;
use openmax_core::record::Record;
use openmax_core::tool::{ToolOutcome, ToolPlan};
use openmax_core::wire::event::FreezeChange;
use openmax_core::wire::Mode;

use crate::config::ProviderSettings;
use crate::prompt::PromptSource;
use crate::provider::{Provider, ProviderConfig};
use crate::session::{Home, ProjectState, SessionWriter};
use crate::tools::ToolContext;

/// The channel every effect answers on.
pub type InputTx = mpsc::UnboundedSender<Input>;

/// Effects performed for one session.
pub struct Backend {
    home: Home,
    project: PathBuf,
    provider: Provider,
    tools: ToolContext,
    state: ProjectState,
    writer: SessionWriter,
    hooks: Vec<HookSpec>,
    /// The prompt files as of the last freeze (to say what a refreeze changed).
    prompt_sources: Vec<PromptSource>,
    /// Project-relative paths this session's own file tools wrote.
    agent_wrote: BTreeSet<String>,
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
    pub fn new(
        home: Home,
        state: ProjectState,
        provider: Provider,
        writer: SessionWriter,
        hooks: Vec<HookSpec>,
    ) -> Result<Backend, String> {
        let project = state.project().to_path_buf();
        let tools = ToolContext::new(&project, writer.session_id())
            .map_err(|e| format!("project {}: {e}", project.display()))?;
        let prompt_sources = crate::prompt::sources(home.root(), &project);
        Ok(Backend {
            home,
            project,
            provider,
            tools,
            state,
            writer,
            hooks,
            prompt_sources,
            agent_wrote: BTreeSet::new(),
        })
    }

    /// Start one attempt of a model request; its items and failures arrive on `tx`.
    pub fn spawn_request(
        &self,
        request: RequestId,
        attempt: u32,
        body: ModelRequest,
        tx: InputTx,
    ) -> JoinHandle<()> {
        self.provider.spawn(request, attempt, body, tx)
    }

    /// A blocking job that inspects a tool call.
    pub fn plan_job(
        &self,
        name: String,
        args: serde_json::Value,
    ) -> impl FnOnce() -> ToolPlan + Send + 'static {
        let ctx = self.tools.clone();
        move || crate::tools::plan(&ctx, &name, &args)
    }

    /// A future that runs a tool call until done or `cancel` fires.
    pub fn run_job(
        &self,
        name: String,
        args: serde_json::Value,
        cancel: oneshot::Receiver<()>,
    ) -> impl Future<Output = ToolOutcome> + Send + 'static {
        let ctx = self.tools.clone();
        async move { crate::tools::run(&ctx, &name, &args, cancel).await }
    }

    /// Append records to the session file (durably).
    pub fn persist(&mut self, records: Vec<Record>) -> Result<(), String> {
        self.writer.append(&records).map_err(|e| e.to_string())
    }

    /// Save the approval mode for the project.
    pub fn save_mode(&self, mode: Mode) -> Result<(), String> {
        self.state.save_mode(mode).map_err(|e| {
            format!(
                "could not save the mode in {}: {e}",
                self.state.dir().display()
            )
        })
    }

    /// Record a human's approval (over the wire) of a source's current bytes, when they still
    /// hash to `source_sha` (the first 12 hex of their sha256).
    pub fn approve_source(&self, source_path: &str, source_sha: &str) -> Result<(), String> {
        let path = self.project.join(source_path);
        let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let full: String = Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        if !full.starts_with(&source_sha.to_ascii_lowercase()) {
            return Err(format!(
                "{source_path} changed since it was shown for approval; nothing was recorded"
            ));
        }
        self.state
            .approve_source(source_path, &full)
            .map_err(|e| e.to_string())
    }

    /// Remember the files a finished tool call wrote (its diffs), so a refreeze can say that
    /// this session's agent changed them.
    pub fn note_tool_done(&mut self, outcome: &ToolOutcome) {
        for d in &outcome.diffs {
            self.agent_wrote.insert(d.path.clone());
        }
    }

    /// Re-read the prompt, tools and hooks for `reload`, with the receipt of what changed.
    pub fn refreeze(&mut self) -> Freeze {
        let now = crate::prompt::sources(self.home.root(), &self.project);
        let mut changes = Vec::new();
        for (old, new) in self.prompt_sources.iter().zip(&now) {
            let change = match (&old.text, &new.text) {
                (None, Some(_)) => "added",
                (Some(_), None) => "removed",
                (Some(a), Some(b)) if a != b => "changed",
                _ => continue,
            };
            let path = match new.path.strip_prefix(&self.project) {
                Ok(rel) => rel.to_string_lossy().into_owned(),
                Err(_) => new.path.to_string_lossy().into_owned(),
            };
            let by = if self.agent_wrote.contains(&path) {
                "agent"
            } else {
                "outside"
            };
            changes.push(FreezeChange {
                kind: "prompt".into(),
                name: new.label.into(),
                change: change.into(),
                path,
                by: by.into(),
            });
        }
        let mut freeze = fresh_freeze(self.home.root(), &self.project, &self.hooks);
        freeze.system = crate::prompt::from_sources(&now);
        freeze.changes = changes;
        self.prompt_sources = now;
        freeze
    }
}

/// A freeze read from disk now: the prompt, the built-in tool schemas, the configured hooks.
pub fn fresh_freeze(home: &Path, project: &Path, hooks: &[HookSpec]) -> Freeze {
    Freeze {
        system: crate::prompt::system_prompt(home, project),
        tools: crate::tools::builtin_schemas(),
        skills: Vec::new(),
        hooks: hooks.to_vec(),
        changes: Vec::new(),
        notes: Vec::new(),
    }
}
