//! `[checkpoints]`: the caps of the checkpoint store behind undo (docs/checkpoints.md). User
//! config only: a project (agent-writable) must not be able to turn off the record of what its
//! agent changed, nor shrink it.

use serde::Deserialize;

use super::error::ConfigError;
use crate::checkpoint::Caps;

/// `[checkpoints]` as written.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointsSection {
    /// `false`: no checkpoints, so no undo (default `true`).
    pub enabled: Option<bool>,
    /// The store's total size, in MiB (default 4096).
    pub max_store_mb: Option<u64>,
    /// The largest file recorded, in MiB (default 64).
    pub max_file_mb: Option<u64>,
    /// Names excluded by the ignore rules listed per checkpoint (default 100000).
    pub max_ignored_entries: Option<u64>,
    /// Checkpoints older than this many days are collected; 0 keeps them (default 30).
    pub max_age_days: Option<f64>,
}

impl CheckpointsSection {
    /// The later file's keys over the earlier's.
    pub fn merge(base: CheckpointsSection, over: CheckpointsSection) -> CheckpointsSection {
        CheckpointsSection {
            enabled: over.enabled.or(base.enabled),
            max_store_mb: over.max_store_mb.or(base.max_store_mb),
            max_file_mb: over.max_file_mb.or(base.max_file_mb),
            max_ignored_entries: over.max_ignored_entries.or(base.max_ignored_entries),
            max_age_days: over.max_age_days.or(base.max_age_days),
        }
    }

    /// The caps, or an error naming the key.
    pub fn caps(&self) -> Result<Caps, ConfigError> {
        let d = Caps::default();
        let positive = |v: Option<u64>, key: &str, default: u64| {
            match v {
            Some(0) => Err(ConfigError(format!(
                "[checkpoints] {key} must be at least 1 (to turn checkpoints off, set enabled = false)"
            ))),
            Some(n) if n > (1 << 40) => Err(ConfigError(format!(
                "[checkpoints] {key} = {n} is too large"
            ))),
            Some(n) => Ok(n << 20),
            None => Ok(default),
        }
        };
        let max_age_ms = match self.max_age_days {
            None => d.max_age_ms,
            Some(x) if x.is_finite() && x >= 0.0 => (x * 86_400_000.0) as u64,
            Some(x) => {
                return Err(ConfigError(format!(
                    "[checkpoints] max_age_days = {x} must be a number of days, 0 or more"
                )))
            }
        };
        Ok(Caps {
            enabled: self.enabled.unwrap_or(true),
            max_store_bytes: positive(self.max_store_mb, "max_store_mb", d.max_store_bytes)?,
            max_file_bytes: positive(self.max_file_mb, "max_file_mb", d.max_file_bytes)?,
            max_ignored: match self.max_ignored_entries {
                Some(n) => n,
                None => d.max_ignored,
            },
            max_age_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_later_files_keys_win_and_the_earliers_stay_where_it_sets_none() {
        let base = CheckpointsSection {
            enabled: Some(false),
            max_store_mb: Some(10),
            max_file_mb: Some(1),
            max_ignored_entries: Some(5),
            max_age_days: Some(2.0),
        };
        assert_eq!(
            CheckpointsSection::merge(base.clone(), CheckpointsSection::default()),
            base
        );
        assert_eq!(
            CheckpointsSection::merge(CheckpointsSection::default(), base.clone()),
            base
        );
        let over = CheckpointsSection {
            enabled: Some(true),
            max_age_days: Some(0.0),
            ..Default::default()
        };
        assert_eq!(
            CheckpointsSection::merge(base.clone(), over),
            CheckpointsSection {
                enabled: Some(true),
                max_age_days: Some(0.0),
                ..base
            }
        );
    }

    #[test]
    fn caps_default_parse_and_refuse_nonsense() {
        assert_eq!(
            CheckpointsSection::default().caps().unwrap(),
            Caps::default()
        );
        let s = CheckpointsSection {
            enabled: Some(false),
            max_store_mb: Some(10),
            max_file_mb: Some(1),
            max_ignored_entries: Some(0),
            max_age_days: Some(0.5),
        };
        let c = s.caps().unwrap();
        assert!(!c.enabled);
        assert_eq!(c.max_store_bytes, 10 << 20);
        assert_eq!(c.max_file_bytes, 1 << 20);
        assert_eq!(c.max_ignored, 0);
        assert_eq!(c.max_age_ms, 43_200_000);
        let bad = CheckpointsSection {
            max_file_mb: Some(0),
            ..Default::default()
        };
        assert!(bad.caps().unwrap_err().0.contains("max_file_mb"));
        let bad = CheckpointsSection {
            max_age_days: Some(-1.0),
            ..Default::default()
        };
        assert!(bad.caps().unwrap_err().0.contains("max_age_days"));
        // The largest size taken is 2^40 MiB; one more is refused, naming the key.
        for key in ["max_store_mb", "max_file_mb"] {
            let at = |n: u64| CheckpointsSection {
                max_store_mb: (key == "max_store_mb").then_some(n),
                max_file_mb: (key == "max_file_mb").then_some(n),
                ..Default::default()
            };
            assert!(at(1 << 40).caps().is_ok(), "{key}");
            let err = at((1 << 40) + 1).caps().unwrap_err().0;
            assert!(err.contains(key) && err.contains("too large"), "{err}");
        }
    }
}
