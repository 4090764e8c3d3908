//! The project's session index, `sessions/index.json`: which sessions exist, when each was
//! created and last used, and where each record's last compaction point is, so `--continue`
//! finds the most recent session and seeks to its context without scanning records.
//!
//! Invariants:
//! - The file is only ever replaced whole by [`super::state::write_atomic`]; readers need no
//!   lock and see the old index or the new one (writers: [`super::index_write`]). A leftover temp file from a crashed writer is a
//!   differently named file and never read.
//! - Read-modify-write happens under an exclusive OS lock on `sessions/.index.lock` (a name
//!   no session id can take, so it never meets a `<id>.lock`), so sessions of one project
//!   written by several processes never lose each other's entries.
//! - `updated_ms` is the session's last use: its creation, each resume, each turn's end and
//!   each compaction point. `turns` and `first_prompt` say what a list of sessions shows; a
//!   session in which no prompt was admitted is skipped by `--continue` and by the list, and
//!   removed by the writer that made it when it ends.
//! - A compaction point in the index is a hint written *after* its record line is on disk: it
//!   may lag behind the record (a crash between the two), never run ahead of it. Resume reads
//!   forward from it and applies any later compaction it finds, so a lagging hint only costs
//!   reading time.
//! - A missing or corrupt index is rebuilt from the records under the same lock (with a notice
//!   on stderr) when a new session adds itself, so a session whose record exists is never
//!   unreachable; resuming never rebuilds it silently (see [`super::resume`]): the person runs
//!   `openmax sessions repair`.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use openmax_core::wire::Mode;
use serde::{Deserialize, Serialize};

/// The index format version (`v`).
pub const INDEX_VERSION: u32 = 1;

/// `sessions/index.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Index {
    pub v: u32,
    /// The project's path (absent in an index written before openmax recorded it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// In creation order.
    pub sessions: Vec<IndexEntry>,
}

/// One session of the index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexEntry {
    pub id: String,
    /// Unix milliseconds.
    pub created_ms: u64,
    /// Unix milliseconds of the last create, resume or compaction.
    pub updated_ms: u64,
    /// The record file's name inside `sessions/`.
    pub record: String,
    /// The last compaction point known to the index, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compaction: Option<CompactionPoint>,
    /// Turns ended (`turn_end` records). `None` in an entry written before openmax counted
    /// them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turns: Option<u64>,
    /// The session's first prompt, one line, cut to [`FIRST_PROMPT_CHARS`]; `None` until a
    /// prompt was admitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_prompt: Option<String>,
}

/// How many characters of the first prompt the index keeps.
pub const FIRST_PROMPT_CHARS: usize = 200;

impl IndexEntry {
    /// Whether a prompt was ever admitted in this session (an entry of an older openmax, which
    /// did not say, counts as used). A session in which nothing was sent is never the one
    /// `--continue` resumes, nor listed.
    pub fn used(&self) -> bool {
        self.first_prompt.is_some() || self.turns.is_none_or(|t| t > 0)
    }
}

/// `text` as the index keeps a first prompt: whitespace runs made one space, cut.
pub fn one_line(text: &str) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(FIRST_PROMPT_CHARS) {
        Some((cut, _)) => format!("{}…", &flat[..cut]),
        None => flat,
    }
}

/// Where a compaction record starts, and what was in force there that precedes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactionPoint {
    /// Byte offset of the compaction record line.
    pub offset: u64,
    /// 1-based line number of that line.
    pub line: u64,
    /// Byte offset of the last `refrozen` line before it (the prompt and schemas in force), if
    /// any; else the header's are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refrozen_offset: Option<u64>,
    /// The mode set by the last `mode_changed` line before it, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,
}

/// Why the index could not be read.
#[derive(Debug)]
pub enum IndexError {
    /// There is no index file.
    Missing,
    /// It exists but is not a readable index of a known version.
    Corrupt(String),
    Io(String),
}

impl Index {
    /// The used session (see [`IndexEntry::used`]) used last: the greatest `updated_ms`
    /// (ties: the later entry).
    pub fn latest(&self) -> Option<&IndexEntry> {
        self.newest_first().into_iter().next()
    }

    /// The used sessions, the one used last first.
    pub fn newest_first(&self) -> Vec<&IndexEntry> {
        let mut used: Vec<(usize, &IndexEntry)> = self
            .sessions
            .iter()
            .enumerate()
            .filter(|(_, e)| e.used())
            .collect();
        used.sort_by_key(|(i, e)| std::cmp::Reverse((e.updated_ms, *i)));
        used.into_iter().map(|(_, e)| e).collect()
    }
}

/// `sessions/index.json` of a sessions directory.
pub fn index_path(sessions_dir: &Path) -> PathBuf {
    sessions_dir.join("index.json")
}

/// Read the index of a sessions directory (no lock: the file is replaced atomically).
pub fn read_index(sessions_dir: &Path) -> Result<Index, IndexError> {
    let path = index_path(sessions_dir);
    let bytes = match fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(IndexError::Missing),
        Err(e) => {
            return Err(IndexError::Io(format!(
                "cannot read {}: {e}",
                path.display()
            )))
        }
    };
    let value: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| {
        IndexError::Corrupt(format!("session index {} is corrupt: {e}", path.display()))
    })?;
    match value.get("v").and_then(|v| v.as_u64()) {
        Some(v) if v == u64::from(INDEX_VERSION) => {}
        Some(v) => {
            return Err(IndexError::Corrupt(format!(
            "session index {} has unknown version {v} (this openmax reads version {INDEX_VERSION})",
            path.display()
        )))
        }
        None => {
            return Err(IndexError::Corrupt(format!(
                "session index {} is corrupt: no version field",
                path.display()
            )))
        }
    }
    serde_json::from_value(value).map_err(|e| {
        IndexError::Corrupt(format!("session index {} is corrupt: {e}", path.display()))
    })
}
