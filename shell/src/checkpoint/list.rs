//! What `openmax undo --list` shows of each entry of a session's log: the files it changed and
//! the lines added and removed in those that are text on both sides.

use std::io;

use super::log::{Entry, Kind};
use super::tree::{Changes, Node, Reader};
use super::Project;

/// An entry's changes in figures.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Figures {
    /// Paths that are files, links or directories on either side (excluded names not counted).
    pub files: u64,
    pub added: u64,
    pub removed: u64,
}

/// Text larger than this is counted as a changed file without its lines.
const DIFF_MAX_BYTES: u64 = 4 << 20;

/// The figures of an entry, or `None` when it never ended (its changes are known at undo).
pub fn figures(p: &Project, e: &Entry) -> io::Result<Option<Figures>> {
    let Some(after) = &e.after else {
        return Ok(None);
    };
    let a = p.manifest(&e.before)?.root;
    let b = p.manifest(after)?.root;
    let mut reader = Reader::new(&p.store);
    let mut c = Changes::new();
    reader.diff(&a, &b, "", &mut c)?;
    let mut f = Figures::default();
    for (before, after) in c.values() {
        let counted = |n: &Option<Node>| matches!(n, Some(Node::File { .. } | Node::Link { .. }));
        if !(counted(before) || counted(after)) {
            continue;
        }
        f.files += 1;
        let text = |n: &Option<Node>| -> Option<String> {
            match n {
                None => Some(String::new()),
                Some(Node::File { hash, size, .. }) if *size <= DIFF_MAX_BYTES => {
                    String::from_utf8(p.store.get(hash).ok()?).ok()
                }
                _ => None,
            }
        };
        if let (Some(x), Some(y)) = (text(before), text(after)) {
            let d = similar::TextDiff::from_lines(&x, &y);
            for op in d.iter_all_changes() {
                match op.tag() {
                    similar::ChangeTag::Insert => f.added += 1,
                    similar::ChangeTag::Delete => f.removed += 1,
                    similar::ChangeTag::Equal => {}
                }
            }
        }
    }
    Ok(Some(f))
}

/// `2026-05-01 12:03:07` (UTC) for Unix milliseconds.
pub fn utc(ms: u64) -> String {
    crate::utc::seconds(ms)
}

/// One line of the list for an entry.
pub fn line(p: &Project, e: &Entry) -> String {
    let when = utc(e.at_ms);
    let figures = match figures(p, e) {
        Ok(Some(f)) => format!(
            "{} file{} +{} -{}",
            f.files,
            if f.files == 1 { "" } else { "s" },
            f.added,
            f.removed
        ),
        Ok(None) => "did not end (openmax was stopped during it)".into(),
        Err(e) => format!("unreadable: {e}"),
    };
    match &e.kind {
        Kind::Turn { turn, prompt } => {
            format!("turn {turn:<4} {when}  {figures}  {prompt:?}")
        }
        Kind::Undo { .. } => format!("undo      {when}  {figures}  {}", super::undo::describe(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00");
        assert_eq!(utc(951_782_400_000), "2000-02-29 00:00:00");
        assert_eq!(utc(1_777_636_987_000), "2026-05-01 12:03:07");
    }
}
