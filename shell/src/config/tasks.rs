//! `[tasks]`: the limits of subagents (the `task` tool, docs/tasks.md). A project config may
//! only lower them ([`super::narrow`]).

use openmax_core::machine::TaskLimits;
use serde::Deserialize;

use super::error::ConfigError;

/// `[tasks]` as written.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TasksSection {
    /// Levels of subagents under a session a human started (default 1: a child may not start
    /// tasks of its own; 0: no tasks at all).
    pub max_depth: Option<u32>,
    /// `task` calls of one reply run at once (default 4, at least 1).
    pub max_parallel: Option<u32>,
}

impl TasksSection {
    /// The later file's keys over the earlier's.
    pub fn merge(base: TasksSection, over: TasksSection) -> TasksSection {
        TasksSection {
            max_depth: over.max_depth.or(base.max_depth),
            max_parallel: over.max_parallel.or(base.max_parallel),
        }
    }

    /// The limits (at depth 0), or an error naming the key.
    pub fn limits(&self) -> Result<TaskLimits, ConfigError> {
        let d = TaskLimits::default();
        if self.max_parallel == Some(0) {
            return Err(ConfigError(
                "[tasks] max_parallel must be at least 1 (to turn tasks off, set max_depth = 0)"
                    .into(),
            ));
        }
        Ok(TaskLimits {
            depth: 0,
            max_depth: self.max_depth.unwrap_or(d.max_depth),
            max_parallel: self.max_parallel.unwrap_or(d.max_parallel),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_values_and_a_zero_parallel_refused() {
        assert_eq!(
            TasksSection::default().limits().unwrap(),
            TaskLimits::default()
        );
        let s = TasksSection {
            max_depth: Some(2),
            max_parallel: Some(8),
        };
        let l = s.limits().unwrap();
        assert_eq!((l.max_depth, l.max_parallel), (2, 8));
        let bad = TasksSection {
            max_parallel: Some(0),
            ..Default::default()
        };
        assert!(bad.limits().unwrap_err().0.contains("max_parallel"));
    }
}
