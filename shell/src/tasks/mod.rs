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
pub mod progress;
pub mod worktree;

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use openmax_core::conversation::ToolSchema;
use openmax_core::tool::{ToolOutcome, ToolPlan, TASK_TOOL};
use openmax_core::wire::Mode;
use serde_json::{json, Value};
use tokio::sync::oneshot;

use crate::extensions::agents::{self, Agent};
use crate::sandbox::Policy;

/// The variable that tells a child session its depth among subagents (absent: 0).
pub const DEPTH_ENV: &str = "OPENMAX_TASK_DEPTH";
/// The variable that gives a child session the frozen definition of the named agent it runs
/// as (JSON of [`Agent`]; absent: none).
pub const AGENT_DEF_ENV: &str = "OPENMAX_TASK_AGENT";

/// The named agent this session runs as, from [`AGENT_DEF_ENV`], read once. Like the depth, it
/// is not a security boundary: an agent only narrows what the config allows, so a process
/// that sets another value gains nothing.
pub fn inherited_agent() -> Option<&'static Agent> {
    static AGENT: OnceLock<Option<Agent>> = OnceLock::new();
    AGENT
        .get_or_init(|| {
            let raw = std::env::var(AGENT_DEF_ENV).ok()?;
            match serde_json::from_str(&raw) {
                Ok(a) => Some(a),
                Err(e) => {
                    eprintln!("openmax: {AGENT_DEF_ENV} is not an agent definition ({e}); ignored");
                    None
                }
            }
        })
        .as_ref()
}

/// A named agent's session sees its instructions after the rest of the system prompt, and
/// only the tools its definition lists.
pub fn narrow_freeze(agent: &Agent, freeze: &mut openmax_core::machine::Freeze) {
    if !agent.prompt.trim().is_empty() {
        freeze.system.push_str(&format!(
            "\n\n# Agent: {}\n\nYou run as the named agent `{}` ({}).\n\n{}",
            agent.name, agent.name, agent.description, agent.prompt
        ));
    }
    if let Some(only) = &agent.tools {
        freeze.tools.retain(|t| only.contains(&t.name));
        if !only.contains(crate::extensions::skills::SKILL_TOOL) {
            freeze.skills.clear();
        }
    }
}

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
                "prompt": {"type": "string", "description": "The whole task for the subagent: what to do, where, and what to report back."},
                "agent": {"type": "string", "description": "Optional: the named agent to run as (its own instructions, tools and limits)."},
                "isolation": {"type": "string", "enum": ["worktree"], "description": "Optional: \"worktree\" runs the subagent in a new git worktree on a branch of its own, so its edits land only there; the result names the branch and its diff stat."}
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
    /// The named agent it runs as.
    pub agent: Option<String>,
    /// Whether it runs in a worktree of its own.
    pub worktree: bool,
}

/// The arguments, or the failed outcome's message.
pub fn args(args: &Value) -> Result<TaskArgs, String> {
    let Some(obj) = args.as_object() else {
        return Err("task: arguments must be an object".into());
    };
    if let Some(k) = obj
        .keys()
        .find(|k| !matches!(k.as_str(), "description" | "prompt" | "agent" | "isolation"))
    {
        return Err(format!(
            "task: unknown argument `{k}` (task takes description, prompt, agent and isolation)"
        ));
    }
    let agent = match obj.get("agent") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if !s.trim().is_empty() => Some(s.trim().to_string()),
        Some(_) => return Err("task: `agent` must be an agent's name".into()),
    };
    let worktree = match obj.get("isolation") {
        None | Some(Value::Null) => false,
        Some(Value::String(s)) if s == "worktree" => true,
        Some(other) => {
            return Err(format!(
                "task: `isolation` must be \"worktree\" (or left out), not {other}"
            ))
        }
    };
    let text = |key: &str| -> Result<String, String> {
        match obj.get(key).and_then(Value::as_str).map(str::trim) {
            Some(s) if !s.is_empty() => Ok(s.to_string()),
            _ => Err(format!("task: `{key}` must be a non-empty string")),
        }
    };
    Ok(TaskArgs {
        description: text("description")?.chars().take(200).collect(),
        prompt: text("prompt")?,
        agent,
        worktree,
    })
}

/// The arguments with their agent found among `known`, or the failed outcome's message.
fn resolve<'a>(call: &Value, known: &'a [Agent]) -> Result<(TaskArgs, Option<&'a Agent>), String> {
    let a = args(call)?;
    let agent = match &a.agent {
        Some(name) => Some(agents::find(known, name)?),
        None => None,
    };
    Ok((a, agent))
}

/// Inspect a `task` call against the frozen agents: it can write (the child's tools can), so
/// `ask` mode asks first. An unknown agent is an invalid call naming the known ones.
pub fn plan(call: &Value, known: &[Agent]) -> ToolPlan {
    match resolve(call, known) {
        Ok((a, agent)) => ToolPlan {
            mutating: true,
            targets: vec![a.description.clone()],
            summary: format!("task: {}", a.description),
            detail: match (agent, a.worktree) {
                (None, false) => a.prompt,
                (agent, worktree) => format!(
                    "{}{}\n\n{}",
                    agent
                        .map(|g| format!("as agent {}", g.name))
                        .unwrap_or_default(),
                    if worktree {
                        " (in a new git worktree)"
                    } else {
                        ""
                    },
                    a.prompt
                )
                .trim_start()
                .to_string(),
            },
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
    /// This session's id ([`crate::human::AGENT_ENV`] of the child).
    pub session_id: String,
    /// This session's depth; the child runs at one more.
    pub depth: u32,
    /// How long a cancelled or finished child may take to answer `done` and exit before its
    /// group is killed.
    pub drain_ms: u64,
    /// Containment: the child's group is tracked like a tool's.
    pub policy: Arc<Policy>,
    /// The running calls and the finished children's totals, for the frontends.
    pub progress: progress::Board,
}

impl Spawner {
    /// Run one `task` call to its end (or until `cancel` fires), with the agents of the
    /// current freeze.
    pub async fn run(
        self: Arc<Self>,
        call_id: String,
        call: Value,
        known: Vec<Agent>,
        cancel: oneshot::Receiver<()>,
        link: Option<Link>,
    ) -> ToolOutcome {
        let (a, agent) = match resolve(&call, &known) {
            Ok(x) => x,
            Err(message) => return fail(message),
        };
        if !a.worktree {
            let watch = self.progress.start(&call_id, &a.description);
            let report = child::drive(&self, &a, agent, &self.project, &watch, cancel, link).await;
            watch.ended(&report.usage(), report.tool_calls);
            return ToolOutcome {
                ok: report.ok(),
                output: report.render(&a.description),
                diffs: Vec::new(),
                images: Vec::new(),
            };
        }
        let (project, description) = (self.project.clone(), a.description.clone());
        let made =
            tokio::task::spawn_blocking(move || self::worktree::create(&project, &description))
                .await
                .unwrap_or_else(|e| Err(format!("task: could not make a worktree: {e}")));
        let wt = match made {
            Ok(wt) => wt,
            Err(message) => return fail(message),
        };
        if let Err(e) = self.admit(&wt.project) {
            return fail(format!(
                "task: could not prepare the worktree's project: {e}"
            ));
        }
        let mut told = a.clone();
        told.prompt = format!(
            "{}\n\n(You work in a git worktree of your own, on the branch {}. openmax commits \
             your changes on that branch when you finish; do not commit them yourself.)",
            a.prompt, wt.branch
        );
        let watch = self.progress.start(&call_id, &a.description);
        let report = child::drive(&self, &told, agent, &wt.project, &watch, cancel, link).await;
        watch.ended(&report.usage(), report.tool_calls);
        let description = a.description.clone();
        let wt2 = wt.clone();
        let settled = tokio::task::spawn_blocking(move || wt2.finish(&description))
            .await
            .unwrap_or_else(|e| format!("worktree: branch {} (not settled: {e})", wt.branch));
        let output = report.render(&a.description);
        let output = match output.split_once('\n') {
            Some((head, rest)) => format!("{head}\n{settled}\n{rest}"),
            None => format!("{output}\n{settled}"),
        };
        ToolOutcome {
            ok: report.ok(),
            output,
            diffs: Vec::new(),
            images: Vec::new(),
        }
    }

    /// A worktree's project is trusted, in the saved mode of this session's project: openmax
    /// made it from this trusted project (the agent cannot trust a project itself).
    fn admit(&self, project: &std::path::Path) -> std::io::Result<()> {
        let home = crate::session::Home::new(self.home.clone());
        let ours = crate::session::ProjectState::open(&home, &self.project);
        let theirs = crate::session::ProjectState::open(&home, project);
        theirs.set_trusted()?;
        if let Some(mode) = ours.mode() {
            theirs.save_mode(mode)?;
        }
        Ok(())
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
        assert!(args(&json!({"description":"d","prompt":"p","model":"x"}))
            .unwrap_err()
            .contains("unknown argument `model`"));
        assert!(
            args(&json!({"description":"d","prompt":"p","isolation":"vm"}))
                .unwrap_err()
                .contains("`isolation` must be")
        );
        let a = args(&json!({"description":"d","prompt":"p","agent":"rev","isolation":"worktree"}))
            .unwrap();
        assert_eq!((a.agent.as_deref(), a.worktree), (Some("rev"), true));
        let unknown = plan(&json!({"description":"d","prompt":"p","agent":"rev"}), &[]);
        assert!(unknown.invalid.unwrap().contains("no agent named \"rev\""));
        let p = plan(&json!({"description":"look","prompt":"list files"}), &[]);
        assert!(p.mutating && p.invalid.is_none());
        assert_eq!(p.summary, "task: look");
    }
}
