//! `--continue`: find the project's most recent session in the index, take its lock, rebuild
//! what the model continues from, and hand back the writer.
//!
//! Reading order and invariants:
//! - The header (line 1) gives the prompt and schemas; if the index names a compaction point,
//!   the last `refrozen` line before it (by offset) and the mode in force there come from the
//!   index, and the record is read forward from the compaction line only. Everything after the
//!   start point is applied in order: `message` appends to the history, `compaction` replaces
//!   it, `refrozen` replaces prompt and schemas, `mode_changed` sets the mode.
//! - A last line with no newline, or a newline-terminated last line that is not valid JSON, is
//!   torn by a crash: it is ignored with a notice and the file is cut back to the last good
//!   line (and synced) before the writer is handed back. Any other bad line is corrupt and the
//!   resume fails naming the file and line; nothing is cut then.
//! - An index compaction hint that does not point at a compaction line is not trusted: the
//!   record is read from the start instead, with a notice.
//! - Memory: the history from the resume point (what the model is sent anyway) plus the
//!   bounded transcript tail (see [`super::transcript`]); never the whole record.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use openmax_core::conversation::{Message, ToolSchema};
use openmax_core::record::{Record, RecordLine};
use openmax_core::wire::{Mode, Transcript};

use super::index::{read_index, CompactionPoint, IndexEntry, IndexError};
use super::index_write::update_index;
use super::line::{parse_line, LineError};
use super::lock::{LockError, SessionLock};
use super::state::{now_ms, ProjectState};
use super::store::SessionWriter;
use super::transcript::TranscriptTail;

/// A resumed session.
#[derive(Debug)]
pub struct Resumed {
    /// The session's owner, positioned after the last good line.
    pub writer: SessionWriter,
    pub session_id: String,
    /// The prompt in force (header, or the last `refrozen`).
    pub system: String,
    /// The frozen schemas in force (header, or the last `refrozen`).
    pub tools: Vec<ToolSchema>,
    /// What the model continues from: the last compaction's messages and every message after.
    pub history: Vec<Message>,
    /// The `transcript` line for the client.
    pub transcript: Transcript,
    /// The mode set by the last `mode_changed` record, if any.
    pub mode: Option<Mode>,
    /// The session's turns so far, as far as the part of the record read tells (the greatest
    /// turn number a `turn_end` or `checkpoint` line names; a `turn_end` of an older version
    /// counts one more). The turn numbers of checkpoints in the store add to it.
    pub turns: u64,
    /// Things to tell the user on stderr (a torn last line ignored, an index hint not used).
    pub notices: Vec<String>,
}

/// Why `--continue` cannot resume. Each is one stderr line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResumeError {
    /// The project has no session (exit 2).
    NoSession,
    /// No session has this id or id prefix, or more than one has the prefix (exit 2); the
    /// message names `openmax sessions`.
    Unknown(String),
    /// The index or the record is unreadable as data.
    Corrupt(String),
    /// Another live process owns the session.
    Locked(String),
    Io(String),
}

impl ResumeError {
    /// The process exit code: 2 for no prior session (or none with that id), else 1.
    pub fn exit_code(&self) -> i32 {
        match self {
            ResumeError::NoSession | ResumeError::Unknown(_) => 2,
            ResumeError::Corrupt(_) | ResumeError::Locked(_) | ResumeError::Io(_) => 1,
        }
    }
}

impl fmt::Display for ResumeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResumeError::NoSession => f.write_str(
                "no prior session to continue in this project (start one without --continue)",
            ),
            ResumeError::Unknown(m)
            | ResumeError::Corrupt(m)
            | ResumeError::Locked(m)
            | ResumeError::Io(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for ResumeError {}

/// What a resume does with the session it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reading {
    /// Take it over: its lock, a torn last line cut off, its last use in the index.
    Own,
    /// Read a copy of its history (`--fork`): no lock, nothing written, the record untouched.
    Copy,
}

/// Resume the project's most recent session (the used session last used).
pub fn resume_latest(state: &ProjectState) -> Result<Resumed, ResumeError> {
    let index = read_for_resume(state)?;
    let entry = index.latest().cloned().ok_or(ResumeError::NoSession)?;
    own(&state.sessions_dir(), &entry)
}

/// Take over `entry`.
fn own(sessions_dir: &Path, entry: &IndexEntry) -> Result<Resumed, ResumeError> {
    let (r, writer) = resume_entry(sessions_dir, entry, Reading::Own)?;
    let writer = writer.ok_or_else(|| {
        ResumeError::Io(format!("session {} was read but not taken over", entry.id))
    })?;
    Ok(Resumed {
        writer,
        session_id: r.from,
        system: r.system,
        tools: r.tools,
        history: r.history,
        transcript: r.transcript,
        mode: r.mode,
        turns: r.turns,
        notices: r.notices,
    })
}

/// Resume the project's session `id` exactly (ACP `session/load`); an id the index does not
/// hold is [`ResumeError::NoSession`].
pub fn resume_id(state: &ProjectState, id: &str) -> Result<Resumed, ResumeError> {
    let index = read_for_resume(state)?;
    let entry = index
        .sessions
        .iter()
        .find(|e| e.id == id)
        .cloned()
        .ok_or(ResumeError::NoSession)?;
    own(&state.sessions_dir(), &entry)
}

/// Resume the session whose id is `prefix` or starts with it (`--resume`).
pub fn resume_prefix(state: &ProjectState, prefix: &str) -> Result<Resumed, ResumeError> {
    let index = read_for_resume(state)?;
    let entry = pick_prefix(&index, prefix)?;
    own(&state.sessions_dir(), &entry)
}

/// The session `prefix` names, read without taking it over (`--fork`): no lock, nothing
/// written, the record left byte for byte as it was.
pub fn read_copy(state: &ProjectState, prefix: &str) -> Result<Copied, ResumeError> {
    let index = read_for_resume(state)?;
    let entry = pick_prefix(&index, prefix)?;
    resume_entry(&state.sessions_dir(), &entry, Reading::Copy).map(|(c, _)| c)
}

/// What a session holds, as read (a copy for `--fork`, or the part of a resume besides its
/// writer).
#[derive(Debug)]
pub struct Copied {
    /// The session read.
    pub from: String,
    pub system: String,
    pub tools: Vec<ToolSchema>,
    pub history: Vec<Message>,
    pub transcript: Transcript,
    pub mode: Option<Mode>,
    /// The session's turns so far (as [`Resumed::turns`]).
    pub turns: u64,
    pub notices: Vec<String>,
}

/// The entry whose id is `prefix` or the only one starting with it.
fn pick_prefix(index: &super::index::Index, prefix: &str) -> Result<IndexEntry, ResumeError> {
    if let Some(e) = index.sessions.iter().find(|e| e.id == prefix) {
        return Ok(e.clone());
    }
    let matches: Vec<&IndexEntry> = index
        .sessions
        .iter()
        .filter(|e| !prefix.is_empty() && e.id.starts_with(prefix))
        .collect();
    match matches.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(ResumeError::Unknown(format!(
            "no session {prefix:?} in this project (`openmax sessions` lists them)"
        ))),
        many => Err(ResumeError::Unknown(format!(
            "{} sessions start with {prefix:?}: {} (give more of the id; `openmax sessions` lists them)",
            many.len(),
            many.iter().map(|e| e.id.as_str()).collect::<Vec<_>>().join(", ")
        ))),
    }
}

/// The index for a resume. A continued session must have a readable index: a missing one
/// (while records exist) or a corrupt one is an error naming `openmax sessions repair`, which
/// rebuilds it; it is never rebuilt silently here.
pub fn read_for_resume(state: &ProjectState) -> Result<super::index::Index, ResumeError> {
    let sessions_dir = state.sessions_dir();
    let repair = |why: String| {
        ResumeError::Corrupt(format!(
            "{why}; run `openmax sessions repair` to rebuild it from the session records"
        ))
    };
    match read_index(&sessions_dir) {
        Ok(i) => Ok(i),
        Err(IndexError::Missing) => {
            let has_records = std::fs::read_dir(&sessions_dir).is_ok_and(|rd| {
                rd.flatten()
                    .any(|e| e.file_name().to_string_lossy().ends_with(".jsonl"))
            });
            if has_records {
                Err(repair(format!(
                    "the session index {} is missing",
                    super::index::index_path(&sessions_dir).display()
                )))
            } else {
                Err(ResumeError::NoSession)
            }
        }
        Err(IndexError::Corrupt(m)) => Err(repair(m)),
        Err(IndexError::Io(m)) => Err(ResumeError::Io(m)),
    }
}

fn resume_entry(
    sessions_dir: &Path,
    entry: &IndexEntry,
    reading: Reading,
) -> Result<(Copied, Option<SessionWriter>), ResumeError> {
    let index_file = super::index::index_path(sessions_dir);
    if Path::new(&entry.record).file_name() != Some(entry.record.as_ref())
        || entry.id.contains(['/', '\\'])
    {
        return Err(ResumeError::Corrupt(format!(
            "session index {} names an invalid record {:?}",
            index_file.display(),
            entry.record
        )));
    }
    let lock = match reading {
        Reading::Own => Some(
            SessionLock::try_acquire(&sessions_dir.join(format!("{}.lock", entry.id))).map_err(
                |e| match e {
                    LockError::Held { .. } => ResumeError::Locked(e.describe(&entry.id)),
                    LockError::Io(_) => ResumeError::Io(e.describe(&entry.id)),
                },
            )?,
        ),
        Reading::Copy => None,
    };
    let path = sessions_dir.join(&entry.record);
    let file = match OpenOptions::new()
        .read(true)
        .append(reading == Reading::Own)
        .open(&path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(ResumeError::Corrupt(format!(
                "session index {} lists session {} but its record {} is missing",
                index_file.display(),
                entry.id,
                path.display()
            )))
        }
        Err(e) => return Err(io_error(&path, e)),
    };
    let file_len = file.metadata().map_err(|e| io_error(&path, e))?.len();
    let mut r = Reader {
        path: path.clone(),
        file,
        file_len,
    };

    // Line 1: the header.
    let (header, header_end) = match r.line_at(0).map_err(|e| io_error(&path, e))? {
        Some((bytes, end)) => (r.parse(&bytes, 1)?, end),
        None => {
            return Err(ResumeError::Corrupt(format!(
                "session record {}: line 1 (the session header) is missing or incomplete",
                path.display()
            )))
        }
    };
    let (system, tools) = match header.record {
        Record::Session {
            session_id,
            system,
            tools,
            ..
        } => {
            if session_id != entry.id {
                return Err(ResumeError::Corrupt(format!(
                    "session record {}: line 1 names session {session_id}, the index says {}",
                    path.display(),
                    entry.id
                )));
            }
            (system, tools)
        }
        other => {
            return Err(ResumeError::Corrupt(format!(
                "session record {}: line 1 is a {} record, not the session header",
                path.display(),
                kind(&other)
            )))
        }
    };
    let mut s = Scan {
        system,
        tools,
        history: Vec::new(),
        mode: None,
        turns: 0,
        last_refrozen: None,
        compaction: None,
        tail: TranscriptTail::default(),
        notices: Vec::new(),
    };

    // Where to start reading forward: the index's compaction point when it checks out.
    let mut start = (header_end, 1u64);
    if let Some(cp) = entry.compaction {
        match s.apply_hint(&r, &cp) {
            Ok(()) => {
                start = (cp.offset, cp.line - 1);
                s.compaction = Some(cp);
            }
            Err(why) => s.notices.push(format!(
                "session index {}: compaction point of session {} not used ({why}); reading the whole record {}",
                index_file.display(),
                entry.id,
                path.display()
            )),
        }
    }
    let (good_len, lines) = s.forward(&mut r, start.0, start.1)?;
    // Images are recorded by hash; their bytes are stored beside the record.
    super::images::restore(&super::images::dir(sessions_dir, &entry.id), &mut s.history);
    if good_len < file_len && reading == Reading::Own {
        r.file
            .set_len(good_len)
            .and_then(|()| r.file.sync_data())
            .map_err(|e| io_error(&path, e))?;
    }
    if start.0 > header_end {
        s.tail
            .read_backwards(&r.file, header_end, start.0)
            .map_err(|m| ResumeError::Corrupt(format!("session record {}: {m}", path.display())))?;
    }

    let Some(lock) = lock else {
        // A copy: nothing is written, and no writer is handed back.
        return Ok((
            Copied {
                from: entry.id.clone(),
                system: s.system,
                tools: s.tools,
                history: s.history,
                transcript: s.tail.finish(&entry.id),
                mode: s.mode,
                turns: s.turns,
                notices: s.notices,
            },
            None,
        ));
    };
    // Mark the session most recently used (and catch the index up with a later compaction).
    // A hint that was rejected is replaced even when the record has no compaction at all.
    let fix_point = s.compaction != entry.compaction;
    if let Err(e) = update_index(sessions_dir, &entry.id, |index| {
        if let Some(e) = index.sessions.iter_mut().find(|e| e.id == entry.id) {
            e.updated_ms = now_ms();
            if fix_point {
                e.compaction = s.compaction;
            }
        }
    }) {
        s.notices.push(format!(
            "could not update the session index {}: {e}",
            index_file.display()
        ));
    }

    let writer = SessionWriter::resumed(
        entry.id.clone(),
        sessions_dir.to_path_buf(),
        path,
        r.file,
        lock,
        good_len,
        lines,
        s.last_refrozen,
        s.mode,
        (
            entry.turns.unwrap_or(0),
            entry.first_prompt.is_some() || entry.turns.is_none(),
        ),
    );
    Ok((
        Copied {
            from: entry.id.clone(),
            system: s.system,
            tools: s.tools,
            history: s.history,
            transcript: s.tail.finish(&entry.id),
            mode: s.mode,
            turns: s.turns,
            notices: s.notices,
        },
        Some(writer),
    ))
}

/// Positioned reads of one record file.
struct Reader {
    path: PathBuf,
    file: File,
    file_len: u64,
}

impl Reader {
    /// The newline-terminated line starting at `offset` (without its newline) and the offset
    /// after it; `None` if the file ends before a newline.
    fn line_at(&self, offset: u64) -> io::Result<Option<(Vec<u8>, u64)>> {
        let mut f = &self.file;
        f.seek(SeekFrom::Start(offset))?;
        let mut buf = Vec::new();
        BufReader::new(f.take(self.file_len.saturating_sub(offset))).read_until(b'\n', &mut buf)?;
        if buf.last() != Some(&b'\n') {
            return Ok(None);
        }
        buf.pop();
        let end = offset + buf.len() as u64 + 1;
        Ok(Some((buf, end)))
    }

    fn parse(&self, bytes: &[u8], line_no: u64) -> Result<RecordLine, ResumeError> {
        parse_line(bytes).map_err(|e| self.corrupt(line_no, &e))
    }

    fn corrupt(&self, line_no: u64, e: &LineError) -> ResumeError {
        ResumeError::Corrupt(format!(
            "session record {}: line {line_no} is corrupt: {}",
            self.path.display(),
            e.message()
        ))
    }
}

/// The state rebuilt while reading.
struct Scan {
    system: String,
    tools: Vec<ToolSchema>,
    history: Vec<Message>,
    mode: Option<Mode>,
    turns: u64,
    last_refrozen: Option<u64>,
    compaction: Option<CompactionPoint>,
    tail: TranscriptTail,
    notices: Vec<String>,
}

impl Scan {
    /// Take prompt, schemas and mode from an index compaction point, after checking that it
    /// points at a compaction line (and its refrozen offset at a refrozen line).
    fn apply_hint(&mut self, r: &Reader, cp: &CompactionPoint) -> Result<(), String> {
        if cp.offset >= r.file_len || cp.line < 2 {
            return Err(format!("offset {} is past the record's end", cp.offset));
        }
        match r.line_at(cp.offset) {
            Ok(Some((bytes, _))) => match parse_line(&bytes) {
                Ok(RecordLine {
                    record: Record::Compaction { .. },
                    ..
                }) => {}
                _ => return Err(format!("no compaction record at offset {}", cp.offset)),
            },
            Ok(None) => return Err(format!("no whole line at offset {}", cp.offset)),
            Err(e) => return Err(e.to_string()),
        }
        if let Some(off) = cp.refrozen_offset {
            match r.line_at(off) {
                Ok(Some((bytes, _))) if off < cp.offset => match parse_line(&bytes) {
                    Ok(RecordLine {
                        record: Record::Refrozen { system, tools },
                        ..
                    }) => {
                        self.system = system;
                        self.tools = tools;
                    }
                    _ => return Err(format!("no refrozen record at offset {off}")),
                },
                Ok(_) => return Err(format!("no refrozen line at offset {off}")),
                Err(e) => return Err(e.to_string()),
            }
        }
        self.last_refrozen = cp.refrozen_offset;
        self.mode = cp.mode;
        Ok(())
    }

    /// Read forward from `offset` (the start of line `lines + 1`) to the end, applying each
    /// record. Returns the end of the last good line and the number of lines up to it.
    fn forward(
        &mut self,
        r: &mut Reader,
        offset: u64,
        mut lines: u64,
    ) -> Result<(u64, u64), ResumeError> {
        let path = r.path.clone();
        let mut f = &r.file;
        f.seek(SeekFrom::Start(offset))
            .map_err(|e| io_error(&path, e))?;
        let mut reader = BufReader::with_capacity(1 << 20, f.take(r.file_len - offset));
        let mut pos = offset;
        let mut buf = Vec::new();
        loop {
            buf.clear();
            let n = reader
                .read_until(b'\n', &mut buf)
                .map_err(|e| io_error(&path, e))?;
            if n == 0 {
                return Ok((pos, lines));
            }
            let line_no = lines + 1;
            if buf.last() != Some(&b'\n') {
                self.torn(&path, line_no, n, "it has no newline");
                return Ok((pos, lines));
            }
            let end = pos + n as u64;
            let line = match parse_line(&buf[..n - 1]) {
                Ok(line) => line,
                Err(LineError::Unparseable(m)) if end == r.file_len => {
                    self.torn(&path, line_no, n, &m);
                    return Ok((pos, lines));
                }
                Err(e) => return Err(r.corrupt(line_no, &e)),
            };
            match line.record {
                Record::Message { message } => {
                    self.tail.push_newer(&message);
                    self.history.push(message);
                }
                Record::Compaction { messages, .. } => {
                    self.compaction = Some(CompactionPoint {
                        offset: pos,
                        line: line_no,
                        refrozen_offset: self.last_refrozen,
                        mode: self.mode,
                    });
                    self.history = messages;
                }
                Record::Refrozen { system, tools } => {
                    self.system = system;
                    self.tools = tools;
                    self.last_refrozen = Some(pos);
                }
                Record::ModeChanged { mode } => self.mode = Some(mode),
                Record::TurnEnd { turn: Some(t), .. } | Record::Checkpoint { turn: t, .. } => {
                    self.turns = self.turns.max(t)
                }
                Record::TurnEnd { turn: None, .. } => self.turns += 1,
                Record::Session { .. } => {
                    return Err(ResumeError::Corrupt(format!(
                        "session record {}: line {line_no} is a second session header",
                        path.display()
                    )))
                }
            }
            pos = end;
            lines = line_no;
        }
    }

    fn torn(&mut self, path: &Path, line_no: u64, bytes: usize, why: &str) {
        self.notices.push(format!(
            "session record {}: ignored a torn last line {line_no} ({bytes} bytes; {why}) left by an interrupted write",
            path.display()
        ));
    }
}

fn kind(r: &Record) -> &'static str {
    match r {
        Record::Session { .. } => "session",
        Record::Message { .. } => "message",
        Record::Compaction { .. } => "compaction",
        Record::ModeChanged { .. } => "mode_changed",
        Record::Refrozen { .. } => "refrozen",
        Record::TurnEnd { .. } => "turn_end",
        Record::Checkpoint { .. } => "checkpoint",
    }
}

fn io_error(path: &Path, e: io::Error) -> ResumeError {
    ResumeError::Io(format!(
        "cannot read session record {}: {e}",
        path.display()
    ))
}
