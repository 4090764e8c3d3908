//! Scenario files: what the simulated client, provider, tools, hooks and disk do in one run.
//!
//! A scenario is serde JSON with three parts:
//! - `config`: how the core is constructed (trust, mode, permissions, retry and limit settings,
//!   the frozen tools with each tool's default plan) and how the provider speaks (`flavor`).
//! - `steps`: the client's timeline: raw stdin lines (garbage included), typed commands, framing
//!   faults, end of input, crash points, each at a virtual time in ms (`at`, default 0). Steps run
//!   in file order after a stable sort by `at`.
//! - queues of scripted outcomes consumed in order as the core asks: `replies` (one
//!   [`Reply`] per model request attempt), `tools` (one [`ToolScript`] per planned call),
//!   `hooks` (each a [`HookScript`]: an outcome and how long the hook runs),
//!   `persist_failures` / `mode_save_failures` / `approval_record_failures` (ordinals, counted
//!   from 0, of the `Persist` / `SaveMode` / `ApproveSource` effects that fail) and
//!   `refreezes`; `persist_delay_ms` makes every
//!   `Persist` answer arrive later, after whatever else is due by then.
//!
//! Invariant: a scenario is plain data; everything the driver does with it is a pure function of
//! it, so one scenario always yields the same run. When a queue runs dry the driver answers with
//! the documented default (see [`crate::driver`]), never with anything random.

use serde::{Deserialize, Serialize};

use openmax_core::conversation::{Message, ToolSchema};
use openmax_core::machine::{
    ChildApproval, FramingFault, Freeze, HookOutcome, HookSpec, Limits, RetrySettings, TaskLimits,
};
use openmax_core::permissions::{Permissions, Rule};
use openmax_core::tool::{FileDiff, PlanSandbox, SourceGate, ToolPlan};
use openmax_core::wire::{ApprovalReason, Mode};
use openmax_core::CoreConfig;

use crate::script::{Flavor, Reply};

/// One scenario file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Scenario {
    /// What the scenario shows (the contract paragraph it pins down).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(default)]
    pub config: SimConfig,
    #[serde(default)]
    pub steps: Vec<Step>,
    /// One per model request attempt, consumed in order.
    #[serde(default)]
    pub replies: Vec<Reply>,
    /// One per planned tool call, consumed in order (bound to the call at `PlanTool`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolScript>,
    /// One per hook run, consumed in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<HookScript>,
    /// Ordinals (from 0) of the `Persist` effects that fail.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub persist_failures: Vec<u64>,
    /// When above 0, every `Persist` is answered this many ms later as a remote answer (as the
    /// shell's writer thread does after its `fdatasync`): client lines, provider items and
    /// timers due first come first. 0: answered at once, ahead of everything else.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub persist_delay_ms: u64,
    /// Ordinals (from 0) of the `SaveMode` effects that fail.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mode_save_failures: Vec<u64>,
    /// Ordinals (from 0) of the `ApproveSource` effects (records of a human's approval of
    /// external code) that fail.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approval_record_failures: Vec<u64>,
    /// Answers to `Refreeze`, consumed in order (default: the initial freeze again).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refreezes: Vec<Freeze>,
    /// Assertions beyond the golden wire.
    #[serde(default)]
    pub expect: Expect,
}

/// Extra assertions a hand-written scenario makes about its run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Expect {
    /// The `Exit` effect's code; `None`: not checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Exactly these call ids get a `RunTool` effect, in this order; `None`: not checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_tools: Option<Vec<String>>,
    /// Exactly this many `SendRequest` effects; `None`: not checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_sent: Option<usize>,
}

/// How the core is built and how the world behaves by default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SimConfig {
    pub session_id: String,
    pub project: String,
    pub seed: u64,
    pub trusted: bool,
    pub agent_spawned: bool,
    pub non_interactive: bool,
    pub mode: Mode,
    /// `Tool` or `Tool(glob)` rules.
    pub deny: Vec<String>,
    pub ask: Vec<String>,
    pub retry: RetrySpec,
    pub limits: LimitSpec,
    pub context_tokens: u64,
    pub system: String,
    /// The frozen tools, each with its default plan.
    pub tools: Vec<SimTool>,
    pub skills: Vec<String>,
    pub hooks: Vec<HookSpec>,
    /// The conversation carried over by `--continue` (what the model saw before this run).
    pub history: Vec<Message>,
    /// Whose finish-reason vocabulary a `Complete` without `finish` uses.
    pub flavor: Flavor,
    /// Inputs fed before the driver declares that the scenario never goes quiet.
    pub step_cap: u64,
    /// A racing shell: answers already in flight for a cancelled request still arrive (the
    /// core must ignore them). Default: a cancel drops them.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub deliver_after_cancel: bool,
    /// `[tasks] max_parallel`: how many `task` calls of one reply run at once.
    pub max_parallel: u32,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            session_id: "s1".into(),
            project: "/sim/project".into(),
            seed: 0,
            trusted: true,
            agent_spawned: false,
            non_interactive: false,
            mode: Mode::Ask,
            deny: Vec::new(),
            ask: Vec::new(),
            retry: RetrySpec::default(),
            limits: LimitSpec::default(),
            context_tokens: 200_000,
            system: "You are openmax under simulation.".into(),
            tools: SimTool::standard_set(),
            skills: Vec::new(),
            hooks: Vec::new(),
            history: Vec::new(),
            flavor: Flavor::Anthropic,
            step_cap: 20_000,
            deliver_after_cancel: false,
            max_parallel: TaskLimits::default().max_parallel,
        }
    }
}

/// `[provider]` retry settings; absent fields take [`RetrySettings::default`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RetrySpec {
    pub max_attempts: u32,
    pub retry_base_ms: u64,
    pub retry_max_ms: u64,
    pub stream_idle_timeout_ms: u64,
}

impl Default for RetrySpec {
    fn default() -> Self {
        let d = RetrySettings::default();
        RetrySpec {
            max_attempts: d.max_attempts,
            retry_base_ms: d.retry_base_ms,
            retry_max_ms: d.retry_max_ms,
            stream_idle_timeout_ms: d.stream_idle_timeout_ms,
        }
    }
}

/// `[limits]`; absent fields take [`Limits::default`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LimitSpec {
    pub max_iterations: u32,
    pub max_agent_tokens: u64,
    pub approval_timeout_ms: u64,
}

impl Default for LimitSpec {
    fn default() -> Self {
        let d = Limits::default();
        LimitSpec {
            max_iterations: d.max_iterations,
            max_agent_tokens: d.max_agent_tokens,
            approval_timeout_ms: d.approval_timeout_ms,
        }
    }
}

/// A frozen tool: its schema plus the plan the simulated shell reports for its calls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimTool {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default = "object_schema")]
    pub parameters: serde_json::Value,
    #[serde(default)]
    pub mutating: bool,
    /// Permission-rule targets; default: the tool name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub targets: Option<Vec<String>>,
    /// The unapproved-source gate of an external tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceGate>,
}

fn object_schema() -> serde_json::Value {
    serde_json::json!({"type": "object"})
}

impl SimTool {
    /// `read_file` (read-only), `write_file` and `shell` (mutating): the default tool set.
    pub fn standard_set() -> Vec<SimTool> {
        ["read_file", "write_file", "shell"]
            .iter()
            .map(|n| SimTool {
                name: n.to_string(),
                description: format!("the {n} tool"),
                parameters: object_schema(),
                mutating: *n != "read_file",
                targets: None,
                source: None,
            })
            .collect()
    }

    /// The schema as frozen.
    pub fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: self.name.clone(),
            description: self.description.clone(),
            parameters: self.parameters.clone(),
        }
    }
}

/// The scripted outcome of one tool call: its plan overrides, its result and its duration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolScript {
    #[serde(default = "yes")]
    pub ok: bool,
    #[serde(default)]
    pub output: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub diffs: Vec<FileDiff>,
    /// Milliseconds from `RunTool` to `ToolDone`.
    #[serde(default)]
    pub delay_ms: u64,
    /// Overrides the tool's default `mutating`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mutating: Option<bool>,
    /// The plan says the call cannot run (unknown tool, bad args, path escape).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalid: Option<String>,
    /// Overrides the tool's source gate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceGate>,
    /// What the plan says of the sandbox (an escalation, or read-only capable); default: the
    /// session's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<PlanSandbox>,
    /// For a `task` call: the approvals its child asks for while it runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub asks: Vec<ChildAsk>,
}

/// One approval a `task` call's child asks for (an `Input::TaskApproval`), `after_ms` after
/// its `RunTool`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildAsk {
    pub after_ms: u64,
    pub reason: ApprovalReason,
}

impl ChildAsk {
    /// The request as the child of call `call_id` sends it, its `k`-th (child id `c<k+1>`).
    pub fn request(&self, call_id: &str, k: usize) -> ChildApproval {
        let (name, source_path, source_sha, env) = match self.reason {
            ApprovalReason::Gate => ("write_file", "", "", Vec::new()),
            ApprovalReason::UnapprovedSource => (
                "deploy",
                ".openmax/tools/deploy.json",
                "0123456789ab",
                vec!["DEPLOY_TOKEN".to_string()],
            ),
        };
        ChildApproval {
            approval_id: format!("c{}", k + 1),
            description: format!("look into {call_id}"),
            name: name.into(),
            summary: format!("{name} for the child's step {}", k + 1),
            detail: "+a line".into(),
            reason: self.reason,
            source_path: source_path.into(),
            source_sha: source_sha.into(),
            env,
        }
    }
}

fn yes() -> bool {
    true
}

impl Default for ToolScript {
    fn default() -> Self {
        ToolScript {
            ok: true,
            output: "tool output".into(),
            diffs: Vec::new(),
            delay_ms: 0,
            mutating: None,
            invalid: None,
            source: None,
            sandbox: None,
            asks: Vec::new(),
        }
    }
}

/// The scripted outcome of one hook run and how long the hook runs. Written flat, as the
/// outcome's own fields plus `delay_ms`: `{"outcome": "refuse", "reason": "…", "delay_ms": 50}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HookScript {
    #[serde(flatten)]
    pub outcome: HookOutcome,
    /// Milliseconds from `RunHook` to `HookDone`. 0: answered at once, before the client's
    /// next line (local work). Above 0: the hook process runs that long, and client lines,
    /// provider items and timers due first come first (a `cancel` or `quit` can reach the
    /// core while the hook runs, and the late answer must then be ignored).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub delay_ms: u64,
}

impl From<HookOutcome> for HookScript {
    fn from(outcome: HookOutcome) -> Self {
        HookScript {
            outcome,
            delay_ms: 0,
        }
    }
}

/// One timeline step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// Virtual time in ms.
    #[serde(default)]
    pub at: u64,
    #[serde(flatten)]
    pub action: Action,
}

/// What happens at a step. Client commands become raw stdin lines (recorded verbatim).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "do", rename_all = "snake_case")]
pub enum Action {
    /// `{"cmd":"user","text":…}`.
    User {
        text: String,
    },
    /// `{"cmd":"approve",…}` with a literal id.
    Approve {
        approval_id: String,
        approved: bool,
    },
    /// `approve` for the oldest approval requested on the wire and not yet settled (an unknown
    /// id `ap-none` when there is none).
    ApprovePending {
        approved: bool,
    },
    /// `approve` for the first approval already settled (an unknown id when there is none).
    ApproveSettled,
    /// `{"cmd":"approval_mode","mode":…}` (any string, illegal ones included).
    ApprovalMode {
        mode: String,
    },
    Reload,
    Cancel,
    Quit,
    /// A JSON value written as one line (for extra fields, missing fields, odd types).
    Cmd {
        cmd: serde_json::Value,
    },
    /// A raw line, verbatim (garbage, blank lines).
    Line {
        line: String,
    },
    /// A framing fault the shell detected.
    Framing {
        fault: FramingFault,
    },
    /// stdin reaches end of input.
    Eof,
    /// The person asks for a compaction now (`Input::Compact`, the TUI's `/compact`).
    Compact,
    /// The turn's task dies unexpectedly (`Input::Crashed`).
    Crash {
        message: String,
    },
    /// The faults stop: every outcome queue is emptied, so defaults (all normal) apply from here.
    Heal,
}

impl Action {
    /// The stdin line of a client command with a fixed form (`None` for the rest).
    pub fn fixed_line(&self) -> Option<String> {
        let v = match self {
            Action::User { text } => serde_json::json!({"cmd": "user", "text": text}),
            Action::Approve {
                approval_id,
                approved,
            } => {
                serde_json::json!({"cmd": "approve", "approval_id": approval_id, "approved": approved})
            }
            Action::ApprovalMode { mode } => {
                serde_json::json!({"cmd": "approval_mode", "mode": mode})
            }
            Action::Reload => serde_json::json!({"cmd": "reload"}),
            Action::Cancel => serde_json::json!({"cmd": "cancel"}),
            Action::Quit => serde_json::json!({"cmd": "quit"}),
            Action::Cmd { cmd } => cmd.clone(),
            Action::Line { line } => return Some(line.clone()),
            Action::ApprovePending { .. }
            | Action::ApproveSettled
            | Action::Framing { .. }
            | Action::Eof
            | Action::Compact
            | Action::Crash { .. }
            | Action::Heal => return None,
        };
        Some(v.to_string())
    }
}

impl Scenario {
    /// Parse a scenario file's text.
    pub fn from_json(text: &str) -> Result<Scenario, String> {
        serde_json::from_str(text).map_err(|e| e.to_string())
    }

    /// Pretty JSON (how regression scenarios are written).
    /// Configuration keys equal to their default are left out.
    pub fn to_json_pretty(&self) -> String {
        // Scenario holds only strings, numbers, bools and JSON values: serializing cannot fail.
        let mut v = serde_json::to_value(self).expect("scenario serializes");
        let d = serde_json::to_value(SimConfig::default()).expect("config serializes");
        if let (Some(obj), Some(d)) = (v.as_object_mut(), d.as_object()) {
            if let Some(cfg) = obj.get_mut("config").and_then(|c| c.as_object_mut()) {
                cfg.retain(|k, val| d.get(k) != Some(val));
            }
            if obj.get("expect") == Some(&serde_json::json!({})) {
                obj.remove("expect");
            }
        }
        serde_json::to_string_pretty(&v).expect("scenario serializes")
    }

    /// The freeze the core starts with.
    pub fn freeze(&self) -> Freeze {
        Freeze {
            system: self.config.system.clone(),
            tools: self.config.tools.iter().map(SimTool::schema).collect(),
            skills: self.config.skills.clone(),
            hooks: self.config.hooks.clone(),
            changes: Vec::new(),
            notes: Vec::new(),
            trusted: None,
        }
    }

    /// The core's configuration. Unparsable permission rules are an error.
    pub fn core_config(&self) -> Result<CoreConfig, String> {
        let c = &self.config;
        let mut cfg = CoreConfig::new(&c.session_id, self.freeze());
        cfg.seed = c.seed;
        cfg.trusted = c.trusted;
        cfg.agent_spawned = c.agent_spawned;
        cfg.non_interactive = c.non_interactive;
        // As the binary runs: turns that write are checkpointed (answered by the driver).
        cfg.checkpoints = true;
        cfg.mode = c.mode;
        cfg.permissions = Permissions {
            deny: c
                .deny
                .iter()
                .map(|r| Rule::parse(r))
                .collect::<Result<_, _>>()?,
            ask: c
                .ask
                .iter()
                .map(|r| Rule::parse(r))
                .collect::<Result<_, _>>()?,
        };
        cfg.retry = RetrySettings {
            max_attempts: c.retry.max_attempts,
            retry_base_ms: c.retry.retry_base_ms,
            retry_max_ms: c.retry.retry_max_ms,
            stream_idle_timeout_ms: c.retry.stream_idle_timeout_ms,
        };
        cfg.limits = Limits {
            max_iterations: c.limits.max_iterations,
            max_agent_tokens: c.limits.max_agent_tokens,
            approval_timeout_ms: c.limits.approval_timeout_ms,
            ..Limits::default()
        };
        cfg.context_tokens = c.context_tokens;
        cfg.history = c.history.clone();
        cfg.tasks.max_parallel = c.max_parallel;
        Ok(cfg)
    }

    /// The plan the simulated shell reports for a call of `name`, with a script's overrides.
    pub fn plan_for(&self, name: &str, args: &serde_json::Value, script: &ToolScript) -> ToolPlan {
        let tool = self.config.tools.iter().find(|t| t.name == name);
        let mutating = script
            .mutating
            .unwrap_or_else(|| tool.is_some_and(|t| t.mutating));
        let targets = tool
            .and_then(|t| t.targets.clone())
            .unwrap_or_else(|| vec![name.to_string()]);
        let invalid = match (&script.invalid, tool) {
            (Some(msg), _) => Some(msg.clone()),
            (None, None) => Some(format!("unknown tool {name:?}")),
            (None, Some(_)) => None,
        };
        ToolPlan {
            mutating,
            targets,
            summary: format!("{name} {args}"),
            detail: format!("{name} with {args}"),
            source: script
                .source
                .clone()
                .or_else(|| tool.and_then(|t| t.source.clone())),
            invalid,
            sandbox: script.sandbox.clone().unwrap_or_default(),
            confirm: None,
        }
    }

    /// Steps sorted stably by time (file order breaks ties).
    pub fn timeline(&self) -> Vec<Step> {
        let mut steps = self.steps.clone();
        steps.sort_by_key(|s| s.at);
        steps
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
