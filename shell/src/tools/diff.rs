//! Unified diffs for `write_file` and `edit_file`, via `similar`.
//!
//! Invariants: headers are `--- a/<path>` / `+++ b/<path>` (also for new files), 3 lines of
//! context, a `\ No newline at end of file` hint where it applies; `added`/`removed` count
//! lines, so a changed line counts once in each.

use openmax_core::tool::FileDiff;
use std::time::Duration;

use similar::{ChangeTag, TextDiff};

/// Diff `old` → `new` for the project-relative `path`.
pub fn unified(path: &str, old: &str, new: &str) -> FileDiff {
    // The deadline bounds the work on huge rewrites (the diff is then coarser, still correct).
    let diff = TextDiff::configure()
        .timeout(Duration::from_secs(2))
        .diff_lines(old, new);
    let mut added = 0u64;
    let mut removed = 0u64;
    for change in diff.iter_all_changes() {
        match change.tag() {
            ChangeTag::Insert => added += 1,
            ChangeTag::Delete => removed += 1,
            ChangeTag::Equal => {}
        }
    }
    let text = diff
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string();
    FileDiff {
        path: path.to_string(),
        diff: text,
        added,
        removed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_header() {
        let d = unified("x.txt", "a\nb\nc\n", "a\nB\nc\nd\n");
        assert_eq!((d.added, d.removed), (2, 1));
        assert!(
            d.diff.starts_with("--- a/x.txt\n+++ b/x.txt\n@@ "),
            "{}",
            d.diff
        );
        assert!(d.diff.contains("-b\n+B\n"));
        let same = unified("x.txt", "a\n", "a\n");
        assert_eq!((same.added, same.removed), (0, 0));
        assert_eq!(same.diff, "");
        let nl = unified("y", "a", "b");
        assert!(
            nl.diff.contains("\\ No newline at end of file"),
            "{}",
            nl.diff
        );
    }
}
