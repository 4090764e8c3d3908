//! The `task` tool: a subagent is a child `openmax --stdio` session (this same binary) that
//! openmax itself starts in the project and drives over the contract (docs/tasks.md).
//!
//! - [`plan`] checks the arguments and shows the call (`task: <description>`, the prompt as
//!   detail); whether this session may start a task at all, and whether a human is asked
//!   first, is the core's decision ([`openmax_core::machine::TaskLimits`], the tool gate).
//! - [`Spawner::run`] starts the child ([`child`]), sends the prompt as one `user` command,
//!   reads its events until its `done`, sends `quit`, and reports the child's last
//!   `message_done` text, its `stop_reason`, its session id, its tool calls and tokens.
//! - The child's approval requests go to this session's core over the [`Link`]
//!   (`Input::TaskApproval`, and `Input::TaskApprovalSettled` when the child settles one
//!   itself); the core's answers come back on it and go down as `approve` commands. What a
//!   request becomes here is the core's rule (`machine::forward`), not this module's.
//!
//! Invariants:
//! - The child is openmax's own process, not the agent's: it runs outside the agent's sandbox
//!   (it must write its session under `$OPENMAX_HOME`) and sandboxes its own tools exactly as
//!   this session does, from the same config files; it is agent-spawned
//!   (`OPENMAX_AGENT_SESSION`), so it cannot change the saved mode, trust or approve anything.
//! - It inherits the provider this session resolved (name, model, base URL, key), its depth
//!   plus one ([`DEPTH_ENV`]) and this session's mode when the call starts ([`MODE_ENV`]),
//!   which the child takes only when it is stricter than the project's saved mode
//!   ([`narrowed_mode`]); never anything wider than this session has.
//! - No child outlives its call: it runs in its own tracked process group, and a cancel, a
//!   dropped call or openmax's exit ends the group (cancel, quit, then a kill after the
//!   deadline).
//! - A call ends `ok: false` unless the child's turn ended normally (a provider finish reason,
//!   `max_iterations`, `budget_exhausted`): `error`, `truncated`, `cancelled`, `refused`,
//!   `blocked`, `unverified` or a child that died before its `done` fail it.

pub mod child;

use std::path::PathBuf;
use std::sync::Arc;

use openmax_core::conversation::ToolSchema;
use openmax_core::tool::{ToolOutcome, ToolPlan, TASK_TOOL};
use openmax_core::wire::Mode;
use serde_json::{json, Value};
use tokio::sync::oneshot;

use crate::sandbox::Policy;

/// The variable that tells a child session its depth among subagents (absent: 0).
pub const DEPTH_ENV: &str = "OPENMAX_TASK_DEPTH";

/// The variable that tells a child session the mode of the session that started it (absent:
/// the project's saved mode alone).
pub const MODE_ENV: &str = "OPENMAX_TASK_MODE";

/// This session's mode from the project's `saved` one and [`MODE_ENV`]: the stricter of the
/// two. The variable only narrows: a process of the agent could set it too, and an agent
/// never gives itself (or another agent) more than a human chose.
pub fn narrowed_mode(saved: Mode) -> Mode {
    match std::env::var(MODE_ENV)
        .ok()
        .as_deref()
        .and_then(Mode::parse)
    {
        Some(m) if m.looseness() < saved.looseness() => m,
        Some(_) | None => saved,
    }
}

/// What joins a running `task` call to this session's core: the child's approval requests go
/// up on `inputs`, the core's answers (the child's approval id, approved) come down on
/// `answers`.
#[derive(Debug)]
pub struct Link {
    /// The `task` call.
    pub call_id: String,
    /// This session's input channel.
    pub inputs: tokio::sync::mpsc::UnboundedSender<openmax_core::machine::Input>,
    /// The core's answers to the child's requests.
    pub answers: tokio::sync::mpsc::UnboundedReceiver<(String, bool)>,
    /// This session's mode when the call started (the child's, when stricter than the saved
    /// one).
    pub mode: Mode,
}

/// This process's depth among subagents, from [`DEPTH_ENV`] (0 when unset or unreadable).
pub fn depth_from_env() -> u32 {
    std::env::var(DEPTH_ENV)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// The `task` tool's schema.
pub fn schema() -> ToolSchema {
    ToolSchema {
        name: TASK_TOOL.to_string(),
        description: "Hand a self-contained piece of work to a subagent: a fresh openmax \
                      session in this project with the same tools and none of this \
                      conversation. Give it everything it needs in `prompt`; it answers once, \
                      when it is done, and only its final message comes back to you (with its \
                      stop reason, tool calls and tokens). Use it to research or change several \
                      independent things at once (several task calls in one reply run side by \
                      side) or to keep long searches out of this context. A subagent may not \
                      start tasks of its own unless [tasks] max_depth allows it."
            .to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "description": {"type": "string", "description": "A short (3-8 word) title of the task, shown to the human."},
                "prompt": {"type": "string", "description": "The whole task for the subagent: what to do, where, and what to report back."}
            },
            "required": ["description", "prompt"],
            "additionalProperties": false
        }),
    }
}

/// The checked arguments of one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskArgs {
    pub description: String,
    pub prompt: String,
}

/// The arguments, or the failed outcome's message.
pub fn args(args: &Value) -> Result<TaskArgs, String> {
    let Some(obj) = args.as_object() else {
        return Err("task: arguments must be an object".into());
    };
    if let Some(k) = obj
        .keys()
        .find(|k| !matches!(k.as_str(), "description" | "prompt"))
    {
        return Err(format!(
            "task: unknown argument `{k}` (task takes description and prompt)"
        ));
    }
    let text = |key: &str| -> Result<String, String> {
        match obj.get(key).and_then(Value::as_str).map(str::trim) {
            Some(s) if !s.is_empty() => Ok(s.to_string()),
            _ => Err(format!("task: `{key}` must be a non-empty string")),
        }
    };
    Ok(TaskArgs {
        description: text("description")?.chars().take(200).collect(),
        prompt: text("prompt")?,
    })
}

/// Inspect a `task` call: it can write (the child's tools can), so `ask` mode asks first.
pub fn plan(call: &Value) -> ToolPlan {
    match args(call) {
        Ok(a) => ToolPlan {
            mutating: true,
            targets: vec![a.description.clone()],
            summary: format!("task: {}", a.description),
            detail: a.prompt,
            source: None,
            invalid: None,
            sandbox: Default::default(),
            confirm: None,
        },
        Err(message) => ToolPlan {
            mutating: true,
            targets: vec![TASK_TOOL.to_string()],
            summary: TASK_TOOL.to_string(),
            detail: String::new(),
            source: None,
            invalid: Some(message),
            sandbox: Default::default(),
            confirm: None,
        },
    }
}

/// What starting a child session takes: this session's resolved provider and where it runs.
#[derive(Debug, Clone)]
pub struct Spawner {
    /// The binary (this one).
    pub exe: PathBuf,
    /// `$OPENMAX_HOME` of this session.
    pub home: PathBuf,
    /// The project root.
    pub project: PathBuf,
    /// `--provider`, `--model` and, when set, `--base-url` of this session.
    pub provider: String,
    pub model: String,
    pub base_url: Option<String>,
    /// The key's variable and value (held in memory since start-up; see `sandbox::scrub`).
    pub key: Option<(String, String)>,
    /// This session's id ([`crate::sandbox::AGENT_ENV`] of the child).
    pub session_id: String,
    /// This session's depth; the child runs at one more.
    pub depth: u32,
    /// How long a cancelled or finished child may take to answer `done` and exit before its
    /// group is killed.
    pub drain_ms: u64,
    /// Containment: the child's group is tracked like a tool's.
    pub policy: Arc<Policy>,
}

impl Spawner {
    /// Run one `task` call to its end (or until `cancel` fires).
    pub async fn run(
        self: Arc<Self>,
        call: Value,
        cancel: oneshot::Receiver<()>,
        link: Option<Link>,
    ) -> ToolOutcome {
        let a = match args(&call) {
            Ok(a) => a,
            Err(message) => return fail(message),
        };
        let report = child::drive(&self, &a, cancel, link).await;
        ToolOutcome {
            ok: report.ok(),
            output: report.render(&a.description),
            diffs: Vec::new(),
            images: Vec::new(),
        }
    }
}

fn fail(output: String) -> ToolOutcome {
    ToolOutcome {
        ok: false,
        output,
        diffs: Vec::new(),
        images: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_checked() {
        assert!(args(&json!({"description":"d","prompt":"p"})).is_ok());
        assert!(args(&json!({"description":"","prompt":"p"}))
            .unwrap_err()
            .contains("description"));
        assert!(args(&json!({"description":"d"}))
            .unwrap_err()
            .contains("prompt"));
        assert!(args(&json!({"description":"d","prompt":"p","agent":"x"}))
            .unwrap_err()
            .contains("unknown argument `agent`"));
        let p = plan(&json!({"description":"look","prompt":"list files"}));
        assert!(p.mutating && p.invalid.is_none());
        assert_eq!(p.summary, "task: look");
    }
}
