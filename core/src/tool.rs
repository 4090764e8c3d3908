//! Tool calls as the core sees them: the plan the shell reports before running a call (what
//! it would touch, how to show it to a human), and the outcome after.
//!
//! Policy (deny rules, modes, `ask` rules, approvals, the unapproved-source gate) is decided in
//! the core from the plan; the shell only inspects and executes.

use serde::{Deserialize, Serialize};

/// The built-in tool that runs a subagent: a child `openmax --stdio` session driven by this
/// one (docs/tasks.md). The core decides whether a session may call it
/// ([`crate::machine::TaskLimits`]); the shell starts and drives the child.
pub const TASK_TOOL: &str = "task";

/// What the shell found when it inspected a call before running it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolPlan {
    /// Whether the call changes anything (write, edit, shell, a mutating external tool).
    pub mutating: bool,
    /// What permission rules match against: the path(s) for file tools, the command line for
    /// `shell` (its rules judge the programs it runs, see [`crate::permissions`]), the tool name
    /// alone when nothing else.
    pub targets: Vec<String>,
    /// A one-line description for an approval card (`write src/a.rs (+3 -1)`).
    pub summary: String,
    /// The full diff or command for the approval card.
    pub detail: String,
    /// Set for external code: the file whose exact bytes need a human's approval.
    pub source: Option<SourceGate>,
    /// The call cannot run at all (unknown tool, bad arguments, path escape): this message is
    /// the failed `tool_end`'s output, and nothing is asked or run.
    pub invalid: Option<String>,
    /// What the call can run in, or asks to run in, beside the session's sandbox (only the
    /// `shell` tool's plan says anything but [`PlanSandbox::Session`]).
    #[serde(default)]
    pub sandbox: PlanSandbox,
    /// Set when the call reaches something new a human should allow once per session (the
    /// host a `web_fetch` asks for when the user config does not allow it): a key naming it.
    /// In `ask` and `readonly` modes such a call is a `gate` request unless a call with the
    /// same key was approved earlier in the session; in `auto` it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirm: Option<String>,
}

/// What a planned call can run in, or asks to run in, beside the session's sandbox. The core
/// decides from it and the mode which [`RunSandbox`] the call gets, if it runs at all.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanSandbox {
    /// The session's sandbox (or no process at all); a mutating call is refused in `readonly`.
    #[default]
    Session,
    /// The call can also run in a read-only sandbox, so `readonly` mode runs it there instead of
    /// refusing it (the `shell` tool where the kernel offers what that needs).
    ReadOnlyCapable,
    /// The model asks to run the call outside the sandbox, for this reason (its own words).
    /// Only a human's `gate` approval in `ask` mode grants it.
    Escalate {
        /// The model's justification, shown to the human.
        justification: String,
    },
}

/// How the summary of the `gate` request for a [`PlanSandbox::Escalate`] call begins, so a
/// client can mark the card (the core writes it; no other summary of a built-in tool starts so).
pub const UNSANDBOXED_SUMMARY_PREFIX: &str = "UNSANDBOXED ";

/// The sandbox a call runs in, decided by the core and carried by `Effect::RunTool`. The
/// shell never takes it from the call's arguments.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunSandbox {
    /// The session's sandbox, as every agent process.
    #[default]
    Session,
    /// A read-only sandbox (`readonly` mode): no writes but to the session's temp directory,
    /// no sockets.
    ReadOnly,
    /// No kernel sandbox: a human approved running this call outside it.
    Unsandboxed,
}

/// The unapproved-source gate of one external tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceGate {
    /// Project-relative path of the manifest (or hook file).
    pub source_path: String,
    /// First 12 lowercase hex of the sha256 over the source bytes.
    pub source_sha: String,
    /// The env allowlist the tool would receive (the credential grant).
    pub env: Vec<String>,
    /// Whether these exact bytes are already approved under `$OPENMAX_HOME`.
    pub approved: bool,
}

/// A diff a file tool produced, emitted as a `diff` event before its `tool_end`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileDiff {
    /// The file, project-relative.
    pub path: String,
    /// The unified diff.
    pub diff: String,
    /// Lines added.
    pub added: u64,
    /// Lines removed.
    pub removed: u64,
}

/// How a call that ran ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolOutcome {
    /// Whether the tool succeeded.
    pub ok: bool,
    /// What the model is told.
    pub output: String,
    /// The files it changed, one diff each.
    pub diffs: Vec<FileDiff>,
    /// Images for the model (`read_file` of an image), sent after the result.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<crate::conversation::Image>,
}
