//! Built-in tools: read_file, list_dir, glob, grep, web_fetch (read-only); write_file,
//! edit_file, shell (mutating); `task` (a subagent, run by [`crate::tasks`]). Paths are confined to the project after resolving symlinks;
//! `web_fetch` runs in openmax itself, under `[tools.web_fetch]` ([`web_fetch`]).
//!
//! The runtime asks [`plan`] about a call first (never runs anything; the core decides
//! approvals from the [`ToolPlan`]), then [`run`]s it. Invariants:
//! - [`builtin_schemas`] is in a fixed order and [`is_builtin`] agrees with it.
//! - Every path argument is re-validated in `run` (the tree may change after `plan`); an
//!   escape is a failed outcome and nothing is read or written.
//! - Every failed outcome's output starts with the tool's name and says why.
//! - `write_file`/`edit_file` outcomes carry their diff; `plan` carries the diff as computed
//!   from the file at plan time in `detail`.
//! - With [`client_files`], the file tools' text comes from and goes to the client (an
//!   editor's buffers); paths are confined here first.

mod args;
mod cap;
pub mod client_files;
pub(crate) mod command;
pub(crate) mod diff;
mod edit;
mod glob;
mod grep;
mod list;
pub mod path;
mod read;
mod schema;
pub mod stop;

pub mod web_fetch;
mod write;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use command::MAX_TIMEOUT_S as SHELL_MAX_TIMEOUT_S;
use openmax_core::conversation::ToolSchema;
pub use openmax_core::tool::{FileDiff, PlanSandbox, RunSandbox, ToolOutcome, ToolPlan};
use serde_json::Value;
use stop::Stop;
use tokio::sync::oneshot;

/// Names of the built-in tools, in schema order.
pub const BUILTIN_NAMES: [&str; 9] = [
    "read_file",
    "list_dir",
    "glob",
    "grep",
    "write_file",
    "edit_file",
    "shell",
    "web_fetch",
    openmax_core::tool::TASK_TOOL,
];

/// What the tools need to know about the session they run in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolContext {
    /// The project root, canonical (symlinks resolved); every path is confined to it.
    pub project: PathBuf,
    /// Value of `OPENMAX_AGENT_SESSION` in spawned processes.
    pub agent_session: String,
    /// Default `shell` timeout.
    pub shell_timeout_ms: u64,
    /// Time limit of every other built-in tool; 0 = none.
    pub tool_timeout_ms: u64,
    /// Byte cap of one tool output (before the notice saying what was cut).
    pub output_cap_bytes: usize,
    /// How processes started for the agent are prepared (environment, containment).
    pub sandbox: Arc<crate::sandbox::Policy>,
    /// The client's text files (ACP `fs`), which the file tools read and write through.
    pub client_files: client_files::ClientFilesRef,
    /// The sandbox the core chose for the call being run (the `shell` tool's; the runtime
    /// sets it per call from the run-tool effect, never from the arguments).
    pub run_sandbox: RunSandbox,
    /// `[tools.web_fetch]`: the hosts `web_fetch` may reach and its caps.
    pub web: web_fetch::policy::WebPolicy,
}

impl ToolContext {
    /// Default `shell` timeout: two minutes.
    pub const DEFAULT_SHELL_TIMEOUT_MS: u64 = 120_000;
    /// Default time limit of the other built-in tools: one minute.
    pub const DEFAULT_TOOL_TIMEOUT_MS: u64 = 60_000;
    /// Default output cap.
    pub const DEFAULT_OUTPUT_CAP_BYTES: usize = 30_000;

    /// A context with the defaults; `project` is canonicalized (it must exist).
    pub fn new(
        project: impl Into<PathBuf>,
        agent_session: impl Into<String>,
    ) -> std::io::Result<Self> {
        Ok(ToolContext {
            project: project.into().canonicalize()?,
            agent_session: agent_session.into(),
            shell_timeout_ms: Self::DEFAULT_SHELL_TIMEOUT_MS,
            tool_timeout_ms: Self::DEFAULT_TOOL_TIMEOUT_MS,
            output_cap_bytes: Self::DEFAULT_OUTPUT_CAP_BYTES,
            sandbox: Arc::default(),
            client_files: Default::default(),
            run_sandbox: RunSandbox::Session,
            web: Default::default(),
        })
    }
}

/// The built-in tools' schemas, in [`BUILTIN_NAMES`] order.
pub fn builtin_schemas() -> Vec<ToolSchema> {
    schema::all()
}

/// Whether `name` is a built-in tool.
pub fn is_builtin(name: &str) -> bool {
    BUILTIN_NAMES.contains(&name)
}

/// Inspect a call before running it (may read files to compute the diff a write would make).
/// Never runs anything.
pub fn plan(ctx: &ToolContext, name: &str, args: &Value) -> ToolPlan {
    match name {
        "read_file" => read::plan(ctx, args),
        "list_dir" => list::plan(ctx, args),
        "glob" => glob::plan(ctx, args),
        "grep" => grep::plan(ctx, args),
        "write_file" => write::plan_write(ctx, args),
        "edit_file" => write::plan_edit(ctx, args),
        "shell" => command::plan(ctx, args),
        web_fetch::NAME => web_fetch::plan(ctx, args),
        openmax_core::tool::TASK_TOOL => crate::tasks::plan(args, &[]),
        other => ToolPlan {
            mutating: false,
            targets: vec![other.to_string()],
            summary: other.to_string(),
            detail: String::new(),
            source: None,
            invalid: Some(unknown(other)),
            sandbox: Default::default(),
            confirm: None,
        },
    }
}

/// Run a call. Sending `()` on `cancel` cancels it: `shell` kills its whole process group,
/// the other tools stop their work at the next check of their [`Stop`], and a failed outcome
/// saying so comes back promptly. A `write_file`/`edit_file` stopped before its commit point
/// changes nothing; one already committing is waited for and reported as it happened. Every
/// tool but `shell` (which has its own) runs under `tool_timeout_ms` the same way. Dropping the
/// sender without sending is not a cancel. Needs a tokio runtime with the IO and time drivers
/// enabled (`enable_all`); any flavor works.
pub async fn run(
    ctx: &ToolContext,
    name: &str,
    args: &Value,
    cancel: oneshot::Receiver<()>,
) -> ToolOutcome {
    let work: fn(&ToolContext, &Value, &Stop) -> ToolOutcome = match name {
        "shell" => return command::run(ctx, args, cancel).await,
        web_fetch::NAME => return web_fetch::run(ctx, args, cancel).await,
        // The backend runs a task when this session can start one ([`crate::tasks`]).
        openmax_core::tool::TASK_TOOL => {
            return fail("task: subagents are not available in this session".into())
        }
        "read_file" => read::run,
        "list_dir" => list::run,
        "glob" => glob::run,
        "grep" => grep::run,
        "write_file" => write::run_write,
        "edit_file" => write::run_edit,
        other => return fail(unknown(other)),
    };
    run_blocking(ctx, name, args, work, cancel).await
}

/// Run `work` on a blocking thread until it returns, `cancel` fires or the time limit passes.
async fn run_blocking(
    ctx: &ToolContext,
    name: &str,
    args: &Value,
    work: fn(&ToolContext, &Value, &Stop) -> ToolOutcome,
    mut cancel: oneshot::Receiver<()>,
) -> ToolOutcome {
    let stop = Arc::new(Stop::new());
    let (ctx2, args2, stop2) = (ctx.clone(), args.clone(), Arc::clone(&stop));
    let mut job = tokio::task::spawn_blocking(move || work(&ctx2, &args2, &stop2));
    let limit = (ctx.tool_timeout_ms > 0).then(|| Duration::from_millis(ctx.tool_timeout_ms));
    let timer = tokio::time::sleep(limit.unwrap_or(Duration::MAX / 4));
    tokio::pin!(timer);
    let mut cancel_live = true;
    let mutating = matches!(name, "write_file" | "edit_file");
    let unchanged = if mutating {
        "; nothing was written"
    } else {
        ""
    };
    let why = loop {
        tokio::select! {
            // A cancel already sent wins over a result that is ready too.
            biased;
            r = &mut cancel, if cancel_live => match r {
                Ok(()) => break format!("{name}: cancelled{unchanged}"),
                Err(_) => cancel_live = false,
            },
            r = &mut job => return joined(name, r),
            () = &mut timer, if limit.is_some() => {
                let hint = if stop.client_wait() {
                    "the client did not answer its file request in time"
                } else if mutating {
                    "try again or use shell"
                } else {
                    "narrow the path, pattern or glob"
                };
                break format!(
                    "{name}: timed out after {} (the [limits] tool_timeout_s limit){unchanged}; {hint}",
                    seconds(ctx.tool_timeout_ms),
                );
            }
        }
    };
    if stop.stop() {
        // The work sees the flag and winds down on its own thread; it changes nothing.
        return fail(why);
    }
    // A write past its commit point: its outcome says what happened to the file.
    joined(name, job.await)
}

fn joined(name: &str, r: Result<ToolOutcome, tokio::task::JoinError>) -> ToolOutcome {
    match r {
        Ok(outcome) => outcome,
        Err(e) => fail(format!("{name}: internal error: {e}")),
    }
}

/// `1.5 s`, `60 s`.
fn seconds(ms: u64) -> String {
    if ms.is_multiple_of(1000) {
        format!("{} s", ms / 1000)
    } else {
        format!("{} s", ms as f64 / 1000.0)
    }
}

fn unknown(name: &str) -> String {
    format!(
        "unknown tool `{name}` (built-in tools: {})",
        BUILTIN_NAMES.join(", ")
    )
}

/// A successful outcome without diffs.
fn ok(output: String) -> ToolOutcome {
    ToolOutcome {
        ok: true,
        output,
        diffs: Vec::new(),
        images: Vec::new(),
    }
}

/// A failed outcome.
fn fail(output: String) -> ToolOutcome {
    ToolOutcome {
        ok: false,
        output,
        diffs: Vec::new(),
        images: Vec::new(),
    }
}

/// The plan of a read-only call.
fn read_plan(targets: Vec<String>, summary: String, detail: String) -> ToolPlan {
    ToolPlan {
        mutating: false,
        targets,
        summary,
        detail,
        source: None,
        invalid: None,
        sandbox: Default::default(),
        confirm: None,
    }
}

/// The plan of a call that cannot run.
fn invalid_plan(mutating: bool, message: String) -> ToolPlan {
    let tool = message.split(':').next().unwrap_or("").to_string();
    ToolPlan {
        mutating,
        targets: vec![tool.clone()],
        summary: tool,
        detail: String::new(),
        source: None,
        invalid: Some(message),
        sandbox: Default::default(),
        confirm: None,
    }
}
