//! What the session's frontends learn of its running subagents, beside the wire: for each
//! running `task` call (by call id) its description, when it started and the tool calls its
//! child made so far; and the sum of every finished child's usage.
//!
//! The parent reads each child's events anyway (it waits for the child's `done`), so it counts
//! as it reads; nothing is added to the contract. The terminal UI draws a running task's line
//! from [`Board::running`] (its draw loop ticks while a turn runs), and `-p --output-format
//! json` adds [`Board::children`] to its totals.
//!
//! Invariant: a call's entry is there from the start of its child to the end of its call
//! (removed when its [`Watch`] is dropped, however the call ends).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use openmax_core::usage::UsageTotals;

/// The running tasks of one session and its finished children's totals.
#[derive(Debug, Clone, Default)]
pub struct Board(Arc<Mutex<Inner>>);

#[derive(Debug, Default)]
struct Inner {
    running: BTreeMap<String, Running>,
    children: Children,
}

#[derive(Debug, Clone)]
struct Running {
    description: String,
    started: Instant,
    tool_calls: u64,
}

/// One running task, as a frontend shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    pub description: String,
    pub elapsed: Duration,
    pub tool_calls: u64,
}

/// What the finished children of a session used, together.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Children {
    /// Calls whose child ended (however).
    pub tasks: u64,
    pub tool_calls: u64,
    pub usage: UsageTotals,
}

impl Board {
    fn with<R>(&self, f: impl FnOnce(&mut Inner) -> R) -> R {
        let mut g = self.0.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut g)
    }

    /// A call's child starts now.
    pub fn start(&self, call_id: &str, description: &str) -> Watch {
        self.with(|i| {
            i.running.insert(
                call_id.to_string(),
                Running {
                    description: description.to_string(),
                    started: Instant::now(),
                    tool_calls: 0,
                },
            )
        });
        Watch {
            board: self.clone(),
            call_id: call_id.to_string(),
        }
    }

    /// The running task of `call_id`, if it is one.
    pub fn running(&self, call_id: &str) -> Option<Progress> {
        self.with(|i| {
            i.running.get(call_id).map(|r| Progress {
                description: r.description.clone(),
                elapsed: r.started.elapsed(),
                tool_calls: r.tool_calls,
            })
        })
    }

    /// The finished children's totals.
    pub fn children(&self) -> Children {
        self.with(|i| i.children.clone())
    }
}

/// One call's entry on the board; dropping it takes the entry off.
#[derive(Debug)]
pub struct Watch {
    board: Board,
    call_id: String,
}

impl Watch {
    /// The child has made `n` tool calls so far.
    pub fn tool_calls(&self, n: u64) {
        self.board.with(|i| {
            if let Some(r) = i.running.get_mut(&self.call_id) {
                r.tool_calls = n;
            }
        });
    }

    /// The child ended, having used `usage` over its `tool_calls`.
    pub fn ended(self, usage: &UsageTotals, tool_calls: u64) {
        self.board.with(|i| {
            let c = &mut i.children;
            c.tasks += 1;
            c.tool_calls += tool_calls;
            c.usage.prompt_tokens += usage.prompt_tokens;
            c.usage.completion_tokens += usage.completion_tokens;
            c.usage.requests += usage.requests;
            if let Some(n) = usage.cached_tokens {
                c.usage.cached_tokens = Some(c.usage.cached_tokens.unwrap_or(0) + n);
            }
        });
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let id = std::mem::take(&mut self.call_id);
        self.board.with(|i| i.running.remove(&id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_is_on_the_board_while_it_runs_and_adds_up_when_it_ends() {
        let b = Board::default();
        let w = b.start("t1", "look around");
        w.tool_calls(3);
        let p = b.running("t1").unwrap();
        assert_eq!((p.description.as_str(), p.tool_calls), ("look around", 3));
        let mut u = UsageTotals::default();
        u.add(10, 2, Some(4));
        w.ended(&u, 3);
        assert!(b.running("t1").is_none());
        let c = b.children();
        assert_eq!((c.tasks, c.tool_calls), (1, 3));
        assert_eq!(
            (
                c.usage.prompt_tokens,
                c.usage.completion_tokens,
                c.usage.cached_tokens
            ),
            (10, 2, Some(4))
        );
        drop(b.start("t2", "dropped"));
        assert!(b.running("t2").is_none());
    }
}
