//! Rebuilding `sessions/index.json` from the session records when it is missing or corrupt, so
//! no session is ever unreachable while its record exists.
//!
//! Invariants:
//! - A rebuild lists every `<id>.jsonl` in the sessions directory whose first line is a
//!   `session` header naming that same id; anything else is skipped with a notice (never
//!   deleted). Entries are in order of the record's last modification, and `created_ms` and
//!   `updated_ms` are that time, so `--continue` takes the session written most recently.
//! - Compaction hints are not recovered: resume then reads such a record from its start (it is
//!   still correct, only slower) and writes the hint again at the next compaction.
//! - A corrupt index is never destroyed: it is renamed to `index.json.corrupt-<ms>` beside the
//!   new one. Rebuilding happens under the index lock (see [`super::index_write::update_index`]).
//! - Every rebuild says so on stderr: what was wrong and how many sessions were recovered.

use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;
use std::time::UNIX_EPOCH;

use openmax_core::record::Record;

use super::index::{index_path, Index, IndexEntry, INDEX_VERSION};
use super::line::parse_line;
use super::state::now_ms;

/// The longest header line read while rebuilding (a header holds the prompt and schemas).
const MAX_HEADER_BYTES: u64 = 64 << 20;

/// An index listing the records found in `sessions_dir`, and the notices to print.
pub fn scan_records(sessions_dir: &Path) -> io::Result<(Index, Vec<String>)> {
    let mut found: Vec<(u64, String, IndexEntry)> = Vec::new();
    let mut notices = Vec::new();
    let mut project: Option<String> = None;
    let dir = match fs::read_dir(sessions_dir) {
        Ok(d) => d,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Ok((
                Index {
                    v: INDEX_VERSION,
                    project: None,
                    sessions: Vec::new(),
                },
                notices,
            ))
        }
        Err(e) => return Err(e),
    };
    for entry in dir {
        let entry = entry?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(id) = name.strip_suffix(".jsonl") else {
            continue;
        };
        if id.is_empty() || id.starts_with('.') {
            continue;
        }
        let path = entry.path();
        match header_id(&path) {
            Ok(Some((h, p))) if h == id => {
                project.get_or_insert(p);
            }
            Ok(Some((h, _))) => {
                notices.push(format!(
                    "{} names session {h:?}, not {id:?}; not listed in the rebuilt index",
                    path.display()
                ));
                continue;
            }
            Ok(None) => {
                notices.push(format!(
                    "{} does not start with a session header; not listed in the rebuilt index",
                    path.display()
                ));
                continue;
            }
            Err(e) => {
                notices.push(format!(
                    "{} could not be read ({e}); not listed in the rebuilt index",
                    path.display()
                ));
                continue;
            }
        }
        let modified = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let (turns, first_prompt) = summarize(&path).unwrap_or((0, None));
        found.push((
            modified,
            id.to_string(),
            IndexEntry {
                id: id.to_string(),
                created_ms: modified,
                updated_ms: modified,
                record: name.to_string(),
                compaction: None,
                turns: Some(turns),
                first_prompt,
            },
        ));
    }
    found.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    Ok((
        Index {
            v: INDEX_VERSION,
            project,
            sessions: found.into_iter().map(|(_, _, e)| e).collect(),
        },
        notices,
    ))
}

/// A record's turns (its `turn_end` lines) and first prompt, read line by line with a light
/// parse (a line that does not parse is skipped: this only summarizes).
pub fn summarize(path: &Path) -> io::Result<(u64, Option<String>)> {
    let mut reader = BufReader::with_capacity(1 << 20, File::open(path)?);
    let mut line = Vec::new();
    let (mut turns, mut first) = (0u64, None);
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            break;
        }
        let bytes = line.strip_suffix(b"\n").unwrap_or(&line);
        if memfind(bytes, b"\"rec\":\"turn_end\"") {
            turns += 1;
        } else if first.is_none() && memfind(bytes, b"\"rec\":\"message\"") {
            if let Ok(Some(v)) = super::line::parse_text_view(bytes) {
                if v.role == openmax_core::conversation::Role::User
                    && !v.has_tool_result
                    && !v.text.trim().is_empty()
                {
                    first = Some(super::index::one_line(&v.text));
                }
            }
        }
    }
    Ok((turns, first))
}

fn memfind(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// The `session_id` and `project` of a record's header, when it has one and it can be read.
pub fn header_of(path: &Path) -> Option<(String, String)> {
    header_id(path).ok().flatten()
}

/// The `session_id` and `project` of the header line of a record, `None` when line 1 is not
/// a header.
fn header_id(path: &Path) -> io::Result<Option<(String, String)>> {
    let mut line = Vec::new();
    BufReader::new(File::open(path)?)
        .take(MAX_HEADER_BYTES)
        .read_until(b'\n', &mut line)?;
    let line = line.strip_suffix(b"\n").unwrap_or(&line);
    Ok(match parse_line(line) {
        Ok(l) => match l.record {
            Record::Session {
                session_id,
                project,
                ..
            } => Some((session_id, project)),
            _ => None,
        },
        Err(_) => None,
    })
}

/// Rebuild the index of `sessions_dir` (the caller holds the index lock). `why` says what was
/// wrong with the old one; a corrupt file is first renamed aside. The notice goes to stderr.
pub fn rebuild(sessions_dir: &Path, why: &str, corrupt: bool) -> io::Result<Index> {
    let path = index_path(sessions_dir);
    let (index, notices) = scan_records(sessions_dir)?;
    let mut kept = String::new();
    if corrupt {
        let aside = sessions_dir.join(format!("index.json.corrupt-{}", now_ms()));
        fs::rename(&path, &aside)?;
        kept = format!("; the old file is kept as {}", aside.display());
    }
    announce(sessions_dir, why, &index, &notices, &kept);
    Ok(index)
}

/// `openmax sessions repair`: rebuild the index of `sessions_dir` from its records under the
/// index lock, whatever the old one's state; what a readable old index knew that the records
/// do not say (when each session started, its compaction point) is kept. A corrupt old index
/// is renamed aside, never destroyed. Returns the report to print.
pub fn repair(sessions_dir: &Path) -> io::Result<String> {
    if !sessions_dir.is_dir() {
        return Ok(format!(
            "no session records in {}: nothing to repair",
            sessions_dir.display()
        ));
    }
    let lock = super::perms::private_file()
        .create(true)
        .truncate(false)
        .write(true)
        .open(sessions_dir.join(".index.lock"))?;
    lock.lock()?;
    let path = index_path(sessions_dir);
    let (old, state) = match super::index::read_index(sessions_dir) {
        Ok(i) => (Some(i), "readable".to_string()),
        Err(super::index::IndexError::Missing) => (None, "missing".to_string()),
        Err(super::index::IndexError::Corrupt(m)) => {
            let aside = sessions_dir.join(format!("index.json.corrupt-{}", now_ms()));
            fs::rename(&path, &aside)?;
            (None, format!("corrupt ({m}); kept as {}", aside.display()))
        }
        Err(super::index::IndexError::Io(m)) => return Err(io::Error::other(m)),
    };
    let (mut index, notices) = scan_records(sessions_dir)?;
    if let Some(old) = &old {
        index.project = index.project.take().or_else(|| old.project.clone());
        for e in &mut index.sessions {
            if let Some(o) = old.sessions.iter().find(|o| o.id == e.id) {
                e.created_ms = o.created_ms;
                e.updated_ms = e.updated_ms.max(o.updated_ms);
                e.compaction = o.compaction;
            }
        }
    }
    super::state::write_json_atomic(&path, &index)?;
    drop(lock);
    let used = index.sessions.iter().filter(|e| e.used()).count();
    let mut report = format!(
        "rebuilt {} from {} session record(s) ({used} with a prompt); the old index was {state}",
        path.display(),
        index.sessions.len()
    );
    for n in notices {
        report.push_str(&format!("\nskipped: {n}"));
    }
    Ok(report)
}

/// Say on stderr that the index was rebuilt, and why.
pub fn announce(sessions_dir: &Path, why: &str, index: &Index, notices: &[String], kept: &str) {
    for n in notices {
        eprintln!("openmax: {n}");
    }
    eprintln!(
        "openmax: {why}; rebuilt {} from {} session record(s){kept}",
        index_path(sessions_dir).display(),
        index.sessions.len()
    );
}
