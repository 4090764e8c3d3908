//! The `task` tool's policy: how deep subagents may nest, and which calls of one reply run
//! side by side. A `task` call starts a child `openmax --stdio` session (the shell drives
//! it); the core decides whether this session may start one at all and when, so the
//! simulator and the unit tests see the rules.
//!
//! Invariants:
//! - The calls of a reply are started in order, one at a time (hooks, `tool_start`, plan,
//!   gate, approval). A call whose run is out does not hold up the next call when both are
//!   `task` calls: a run of consecutive `task` calls runs side by side, at most
//!   `max_parallel` at once (the next one starts as soon as one of them ends). Any other call
//!   runs alone: it starts only once every run before it ended, and nothing starts while it
//!   runs. So a reply `task, task, read_file, task` runs the two tasks together, then
//!   `read_file`, then the last task.
//! - Each run ends with exactly one `tool_end`, in the order the results come; a cancel
//!   cancels every run that is out, and the turn's `done` waits for all of them.
//! - A session at depth `d` (0 for a session a human or a client started, `d + 1` for the
//!   child of a depth-`d` task) may start a task only while `d < max_depth`; otherwise the call
//!   fails with a tool error saying so, before anything is asked or run.
//! - A named agent's session (a child started with `agent`) may call only the tools its
//!   definition lists (`CoreConfig::only_tools`): the shell offers the model no others, and a
//!   call of another tool (a name the model made up or remembered) fails with a tool error,
//!   before anything is asked or run.
//! - The depth rule is a resource limit, not a security boundary: the depth reaches a child through
//!   its environment, which the agent's own processes could set otherwise (they are sandboxed
//!   and agent-spawned either way).

use std::collections::BTreeSet;

use crate::tool::TASK_TOOL;

/// The failed result of a call of `name` outside a named agent's tool list, with its note;
/// `None` when the session has no such list or the tool is on it.
pub(super) fn outside_agent(
    only: &Option<BTreeSet<String>>,
    name: &str,
) -> Option<(String, String)> {
    let only = only.as_ref()?;
    if only.contains(name) {
        return None;
    }
    let list: Vec<&str> = only.iter().map(String::as_str).collect();
    let output = format!(
        "{name}: refused: this subagent's agent definition does not give it `{name}` (its tools: {})",
        if list.is_empty() { "none".to_string() } else { list.join(", ") }
    );
    let note = format!(
        "openmax refused this call: this session may use only the tools its agent definition \
         lists. Do not retry `{name}`; use the tools you were given."
    );
    Some((output, note))
}

/// `[tasks]`: the limits of subagents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskLimits {
    /// This session's depth: 0 unless it is itself the child of a `task` call.
    pub depth: u32,
    /// How many levels of tasks may nest under a session a human started (default 1: its
    /// children may not start tasks of their own).
    pub max_depth: u32,
    /// How many `task` calls of one reply may run at once (default 4).
    pub max_parallel: u32,
}

impl Default for TaskLimits {
    fn default() -> Self {
        TaskLimits {
            depth: 0,
            max_depth: 1,
            max_parallel: 4,
        }
    }
}

impl TaskLimits {
    /// Whether a call of `name` may run beside other runs (a `task` call).
    pub(super) fn runs_beside(name: &str) -> bool {
        name == TASK_TOOL
    }

    /// Whether a call of `name` may start now, while `running` runs are out, `all_beside`
    /// saying whether each of them may run beside others: at once when none is out; beside
    /// them only a `task` call, while every run out is one and fewer than `max_parallel` are.
    pub(super) fn may_start(&self, name: &str, running: usize, all_beside: bool) -> bool {
        running == 0
            || (Self::runs_beside(name)
                && all_beside
                && running < self.max_parallel.max(1) as usize)
    }

    /// The failed result of a call of `name` this session may not make (a `task` call at or
    /// past `max_depth`), with the harness note that rides it; `None` when the call may go on.
    pub(super) fn refusal(&self, name: &str) -> Option<(String, String)> {
        if name != TASK_TOOL || self.depth < self.max_depth {
            return None;
        }
        let output = format!(
            "task: refused: this session is a subagent at depth {} and [tasks] max_depth is {}, \
             so it may not start tasks of its own; do the work here instead",
            self.depth, self.max_depth
        );
        let note = format!(
            "openmax refused this task call: subagents may nest only {} level(s) deep ([tasks] \
             max_depth). Do not retry it; do the work with the other tools.",
            self.max_depth
        );
        Some((output, note))
    }
}
