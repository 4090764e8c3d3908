//! A session's checkpoint log: `projects/<project>/checkpoints/<session>.jsonl`, appended line
//! by line with one `write` each (not fsynced, as the checkpoints it names are not: see
//! [`super::store`]), so a checkpoint a turn took is findable even when openmax is killed right
//! after. Lines, each `{"v":1,"e":…}`:
//!
//! - `before` (`turn`, `cp`, `prompt`, `at_ms`): the turn's checkpoint before its first write;
//! - `after` (`turn`, `cp`, `at_ms`): the state the turn left, when it ended;
//! - `undo` (`to_turn`, `before`, `after`, `restored`, `kept`, `at_ms`): an undo, itself
//!   undoable: `before` is the project just before it, `after` just after.
//!
//! The entries a reader assembles ([`Entry`]) are the turns (a `before` with its `after`, if
//! any) and the undos, in order. A torn last line (a crash mid-append) is skipped.

use std::io::{self, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

/// One log line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "e", rename_all = "snake_case")]
pub enum Line {
    Before {
        turn: u64,
        cp: String,
        #[serde(default)]
        prompt: String,
        at_ms: u64,
    },
    After {
        turn: u64,
        cp: String,
        at_ms: u64,
    },
    Undo {
        to_turn: u64,
        /// What it undid, in words (`turn 3`, `turns 2-4`, `the undo of turn 3`).
        #[serde(default)]
        what: String,
        before: String,
        after: String,
        #[serde(default)]
        restored: Vec<String>,
        #[serde(default)]
        kept: Vec<String>,
        at_ms: u64,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Versioned {
    v: u32,
    #[serde(flatten)]
    line: Line,
}

/// What an entry is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A turn, with the first line of its prompt.
    Turn { turn: u64, prompt: String },
    /// An undo that restored the project to before turn `to_turn`.
    Undo {
        to_turn: u64,
        what: String,
        restored: usize,
        kept: usize,
    },
}

/// A change to the project the log knows of: before and (when known) after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub kind: Kind,
    pub before: String,
    /// `None`: a turn that never ended (openmax was killed, or it is running).
    pub after: Option<String>,
    pub at_ms: u64,
}

impl Entry {
    /// The turn number (an undo's: the turn it went back to).
    pub fn turn(&self) -> u64 {
        match &self.kind {
            Kind::Turn { turn, .. } => *turn,
            Kind::Undo { to_turn, .. } => *to_turn,
        }
    }
}

/// The log's file for a session in the project's checkpoint directory.
pub fn path(dir: &Path, session: &str) -> std::path::PathBuf {
    dir.join(format!("{session}.jsonl"))
}

/// Append one line.
pub fn append(dir: &Path, session: &str, line: Line) -> io::Result<()> {
    crate::session::perms::private_dir_all(dir)?;
    let mut text = serde_json::to_string(&Versioned { v: 1, line })
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    text.push('\n');
    let mut f = crate::session::perms::private_file()
        .append(true)
        .create(true)
        .open(path(dir, session))?;
    f.write_all(text.as_bytes())
}

/// Every line of a session's log (none when there is no log).
pub fn lines(dir: &Path, session: &str) -> io::Result<Vec<Line>> {
    let text = match std::fs::read_to_string(path(dir, session)) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let all: Vec<&str> = text.split_inclusive('\n').collect();
    let mut out = Vec::new();
    for (i, raw) in all.iter().enumerate() {
        let last = i + 1 == all.len();
        match serde_json::from_str::<Versioned>(raw.trim_end()) {
            Ok(v) if v.v == 1 => out.push(v.line),
            // A crash mid-append leaves at most a torn last line.
            _ if last && !raw.ends_with('\n') => {}
            Ok(v) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{} line {}: version {} (this openmax reads 1)",
                        path(dir, session).display(),
                        i + 1,
                        v.v
                    ),
                ))
            }
            Err(e) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{} line {}: {e}", path(dir, session).display(), i + 1),
                ))
            }
        }
    }
    Ok(out)
}

/// The entries of a session's log, in order.
pub fn entries(lines: &[Line]) -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::new();
    for l in lines {
        match l {
            Line::Before {
                turn,
                cp,
                prompt,
                at_ms,
            } => out.push(Entry {
                kind: Kind::Turn {
                    turn: *turn,
                    prompt: prompt.clone(),
                },
                before: cp.clone(),
                after: None,
                at_ms: *at_ms,
            }),
            Line::After { turn, cp, .. } => {
                if let Some(e) = out
                    .iter_mut()
                    .rev()
                    .find(|e| matches!(&e.kind, Kind::Turn { turn: t, .. } if t == turn))
                {
                    e.after = Some(cp.clone());
                }
            }
            Line::Undo {
                to_turn,
                what,
                before,
                after,
                restored,
                kept,
                at_ms,
            } => out.push(Entry {
                kind: Kind::Undo {
                    to_turn: *to_turn,
                    what: what.clone(),
                    restored: restored.len(),
                    kept: kept.len(),
                },
                before: before.clone(),
                after: Some(after.clone()),
                at_ms: *at_ms,
            }),
        }
    }
    out
}

/// Checkpoint ids the log names.
pub fn ids(lines: &[Line]) -> Vec<String> {
    let mut out = Vec::new();
    for l in lines {
        match l {
            Line::Before { cp, .. } | Line::After { cp, .. } => out.push(cp.clone()),
            Line::Undo { before, after, .. } => {
                out.push(before.clone());
                out.push(after.clone());
            }
        }
    }
    out
}

/// The time of a line.
pub fn at_ms(l: &Line) -> u64 {
    match l {
        Line::Before { at_ms, .. } | Line::After { at_ms, .. } | Line::Undo { at_ms, .. } => *at_ms,
    }
}

/// Replace a session's log with `lines` (a collection), or remove it when none are left.
pub fn rewrite(dir: &Path, session: &str, lines: &[Line]) -> io::Result<()> {
    if lines.is_empty() {
        return match std::fs::remove_file(path(dir, session)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        };
    }
    let mut text = String::new();
    for l in lines {
        text.push_str(
            &serde_json::to_string(&Versioned {
                v: 1,
                line: l.clone(),
            })
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?,
        );
        text.push('\n');
    }
    super::store::replace_file(&path(dir, session), text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_pair_turns_and_skip_a_torn_tail() {
        let dir = crate::scratch::path("cplog");
        let _ = std::fs::remove_dir_all(&dir);
        let b = |turn: u64, cp: &str| Line::Before {
            turn,
            cp: cp.into(),
            prompt: format!("p{turn}"),
            at_ms: turn,
        };
        append(&dir, "s", b(1, "a")).unwrap();
        append(
            &dir,
            "s",
            Line::After {
                turn: 1,
                cp: "b".into(),
                at_ms: 2,
            },
        )
        .unwrap();
        append(&dir, "s", b(3, "c")).unwrap();
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(path(&dir, "s"))
            .unwrap();
        f.write_all(b"{\"v\":1,\"e\":\"aft").unwrap();
        let ls = lines(&dir, "s").unwrap();
        let es = entries(&ls);
        assert_eq!(es.len(), 2);
        assert_eq!(es[0].after.as_deref(), Some("b"));
        assert_eq!(es[1].after, None);
        assert_eq!(es[1].turn(), 3);
        assert_eq!(ids(&ls), ["a", "b", "c"]);
        assert!(lines(&dir, "none").unwrap().is_empty());
        std::fs::write(path(&dir, "bad"), "nope\n{}\n").unwrap();
        assert!(lines(&dir, "bad").is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
