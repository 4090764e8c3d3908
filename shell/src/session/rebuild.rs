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
//!   new one. Rebuilding happens under the index lock (see [`super::index::update_index`]).
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
    let dir = match fs::read_dir(sessions_dir) {
        Ok(d) => d,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Ok((
                Index {
                    v: INDEX_VERSION,
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
            Ok(Some(h)) if h == id => {}
            Ok(Some(h)) => {
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
        found.push((
            modified,
            id.to_string(),
            IndexEntry {
                id: id.to_string(),
                created_ms: modified,
                updated_ms: modified,
                record: name.to_string(),
                compaction: None,
            },
        ));
    }
    found.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    Ok((
        Index {
            v: INDEX_VERSION,
            sessions: found.into_iter().map(|(_, _, e)| e).collect(),
        },
        notices,
    ))
}

/// The `session_id` of the header line of a record, `None` when line 1 is not a header.
fn header_id(path: &Path) -> io::Result<Option<String>> {
    let mut line = Vec::new();
    BufReader::new(File::open(path)?)
        .take(MAX_HEADER_BYTES)
        .read_until(b'\n', &mut line)?;
    let line = line.strip_suffix(b"\n").unwrap_or(&line);
    Ok(match parse_line(line) {
        Ok(l) => match l.record {
            Record::Session { session_id, .. } => Some(session_id),
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
