//! Writing a session: [`SessionWriter`] owns one session's record file
//! (`sessions/<id>.jsonl`) and its exclusive lock for the process's life, and appends record
//! lines durably.
//!
//! Invariants:
//! - The record file holds only whole lines of JSON ([`RecordLine`]), the first one the
//!   `session` header. Each [`SessionWriter::append`] is one `write` of whole lines followed by
//!   `fdatasync`; after it returns `Ok` those records survive a crash. This is the only fsync on
//!   the hot path.
//! - If a write or sync fails, the file is cut back to the end of the last good line (so a
//!   later append never leaves a torn line in the middle); if even that fails the writer is
//!   poisoned and every later append fails.
//! - A compaction record is written to the record first and then, as a seek hint, to the index
//!   (see [`super::index`]); an index write that fails is retried on the next append and never
//!   fails an append whose records are on disk.
//! - Exactly one writer per session exists at a time across all processes ([`SessionLock`]).

use std::fmt;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use openmax_core::record::{Record, RecordLine, RECORD_VERSION};
use openmax_core::wire::Mode;
use serde::Serialize;

use super::index::{CompactionPoint, IndexEntry};
use super::index_write::update_index;
use super::lock::{LockError, SessionLock};
use super::state::{now_ms, sync_dir, ProjectState};

/// The owner of one session's record.
#[derive(Debug)]
pub struct SessionWriter {
    session_id: String,
    sessions_dir: PathBuf,
    path: PathBuf,
    file: File,
    lock: SessionLock,
    /// End of the last good line (the file's length when not poisoned).
    len: u64,
    /// Lines in the file.
    lines: u64,
    /// Offset of the last `refrozen` line, if any.
    last_refrozen: Option<u64>,
    /// Mode set by the last `mode_changed` line, if any.
    mode: Option<Mode>,
    /// A compaction point on disk in the record but not yet in the index.
    index_pending: Option<CompactionPoint>,
    /// Why appends are refused, after a failure that could not be rolled back.
    poisoned: Option<String>,
    /// Created with [`SessionWriter::create_unsettled`] and not yet made durable and indexed:
    /// (the sessions directory was new, created time).
    unsettled: Option<(bool, u64)>,
    /// The project's path, for the index.
    project: String,
    /// Turns ended in this session (the index's `turns`).
    turns: u64,
    /// Whether a prompt was ever admitted (the index has its `first_prompt`).
    prompted: bool,
    /// The first prompt, one line, not yet in the index.
    first_prompt_pending: Option<String>,
    /// A turn ended since the index was last written.
    turns_pending: bool,
    /// When the last turn recorded here ended, as the core asked for its record (0: none).
    used_ms: u64,
    /// Made by this writer (not resumed) and to be removed when it ends with no prompt ever
    /// admitted ([`SessionWriter::discard_when_unused`]).
    discard_unused: bool,
}

/// Why a session could not be created.
#[derive(Debug)]
pub enum StoreError {
    /// A record with this id already exists.
    Exists(String),
    /// Another process owns the session.
    Locked(String),
    /// The id or header is not acceptable.
    Invalid(String),
    Io(String),
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Exists(m)
            | StoreError::Locked(m)
            | StoreError::Invalid(m)
            | StoreError::Io(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for StoreError {}

impl SessionWriter {
    /// Start a new session: create `sessions/`, take the session's lock, write the header line
    /// (durably, with the file's directory entry), then add the session to the index.
    /// `header` must be a [`Record::Session`] whose `session_id` is `session_id`.
    pub fn create(
        state: &ProjectState,
        session_id: &str,
        header: Record,
    ) -> Result<SessionWriter, StoreError> {
        let mut w = SessionWriter::create_unsettled(state, session_id, header)?;
        w.settle().map_err(|e| StoreError::Io(e.to_string()))?;
        Ok(w)
    }

    /// [`SessionWriter::create`] without its flushes and index update: the session is owned
    /// (locked) and its header written, but not yet durable nor findable by `--continue` until
    /// [`SessionWriter::settle`] (which the first `append` also does). Lets `--stdio` write
    /// `hello` before waiting on the disk; nothing the client sees as finished depends on it.
    pub fn create_unsettled(
        state: &ProjectState,
        session_id: &str,
        header: Record,
    ) -> Result<SessionWriter, StoreError> {
        check_id(session_id)?;
        match &header {
            Record::Session { session_id: h, .. } if h == session_id => {}
            Record::Session { session_id: h, .. } => {
                return Err(StoreError::Invalid(format!(
                    "session header names session {h:?}, not {session_id:?}"
                )))
            }
            _ => {
                return Err(StoreError::Invalid(
                    "a session record must start with a session header".to_string(),
                ))
            }
        }
        let sessions_dir = state.sessions_dir();
        let io_err = |what: &str, p: &Path, e: io::Error| {
            StoreError::Io(format!("cannot {what} {}: {e}", p.display()))
        };
        let new_dir = !sessions_dir.is_dir();
        super::perms::private_dir_all(&sessions_dir)
            .map_err(|e| io_err("create", &sessions_dir, e))?;
        let lock_path = sessions_dir.join(format!("{session_id}.lock"));
        let lock = SessionLock::try_acquire(&lock_path).map_err(|e| match e {
            LockError::Held { .. } => StoreError::Locked(e.describe(session_id)),
            LockError::Io(_) => StoreError::Io(e.describe(session_id)),
        })?;
        let record_name = format!("{session_id}.jsonl");
        let path = sessions_dir.join(&record_name);
        let mut file = match super::perms::private_file()
            .append(true)
            .create_new(true)
            .open(&path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                return Err(StoreError::Exists(format!(
                    "session record {} already exists",
                    path.display()
                )))
            }
            Err(e) => return Err(io_err("create", &path, e)),
        };
        let mut line = RecordLine::new(header).to_json().into_bytes();
        line.push(b'\n');
        file.write_all(&line)
            .map_err(|e| io_err("write", &path, e))?;
        Ok(SessionWriter {
            session_id: session_id.to_string(),
            sessions_dir,
            path,
            file,
            lock,
            len: line.len() as u64,
            lines: 1,
            last_refrozen: None,
            mode: None,
            index_pending: None,
            poisoned: None,
            unsettled: Some((new_dir, now_ms())),
            project: state.project().display().to_string(),
            turns: 0,
            prompted: false,
            first_prompt_pending: None,
            turns_pending: false,
            used_ms: 0,
            discard_unused: false,
        })
    }

    /// Make an unsettled session durable (header and directory entries flushed) and add it to
    /// the index. A no-op once done.
    pub fn settle(&mut self) -> io::Result<()> {
        let Some((new_dir, created)) = self.unsettled else {
            return Ok(());
        };
        let with_path = |what: &str, p: &Path, e: io::Error| {
            io::Error::new(e.kind(), format!("cannot {what} {}: {e}", p.display()))
        };
        if new_dir {
            // Make the new directories themselves durable (best effort beyond our own).
            if let Some(parent) = self.sessions_dir.parent() {
                let _ = sync_dir(parent);
                if let Some(grand) = parent.parent() {
                    let _ = sync_dir(grand);
                }
            }
        }
        self.file
            .sync_data()
            .and_then(|()| sync_dir(&self.sessions_dir))
            .map_err(|e| with_path("write", &self.path, e))?;
        let id = self.session_id.clone();
        let record = format!("{id}.jsonl");
        let project = self.project.clone();
        update_index(&self.sessions_dir, &id, |index| {
            index.project.get_or_insert(project);
            index.sessions.retain(|e| e.id != id);
            index.sessions.push(IndexEntry {
                id: id.clone(),
                created_ms: created,
                updated_ms: created,
                record,
                compaction: None,
                turns: Some(0),
                first_prompt: None,
            });
        })
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "cannot update the session index in {}: {e}",
                    self.sessions_dir.display()
                ),
            )
        })?;
        self.unsettled = None;
        Ok(())
    }

    /// [`SessionWriter::append`] of records the core asked for at `at_ms`: a turn's end among
    /// them makes that the session's last use in the index, even when the write comes later.
    pub fn append_at(&mut self, records: &[Record], at_ms: u64) -> io::Result<()> {
        if records.iter().any(|r| matches!(r, Record::TurnEnd { .. })) {
            self.used_ms = self.used_ms.max(at_ms);
        }
        self.append(records)
    }

    /// Append records, one line each, in one write, then `fdatasync`. After `Ok` the records
    /// survive a crash. A `session` header cannot be appended.
    pub fn append(&mut self, records: &[Record]) -> io::Result<()> {
        if let Some(why) = &self.poisoned {
            return Err(io::Error::other(format!(
                "session record {} is unusable after an earlier failure: {why}",
                self.path.display()
            )));
        }
        if records.is_empty() {
            return Ok(());
        }
        self.settle()?;
        let mut buf = Vec::new();
        let mut lines = self.lines;
        let mut last_refrozen = self.last_refrozen;
        let mut mode = self.mode;
        let mut compaction = None;
        for record in records {
            let start = self.len + buf.len() as u64;
            lines += 1;
            match record {
                Record::Session { .. } => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "the session header is written once, by SessionWriter::create",
                    ))
                }
                Record::Compaction { .. } => {
                    compaction = Some(CompactionPoint {
                        offset: start,
                        line: lines,
                        refrozen_offset: last_refrozen,
                        mode,
                    })
                }
                Record::Refrozen { .. } => last_refrozen = Some(start),
                Record::ModeChanged { mode: m } => mode = Some(*m),
                Record::Message { message } => {
                    if !self.prompted && self.first_prompt_pending.is_none() {
                        self.first_prompt_pending = prompt_of(message);
                    }
                }
                Record::TurnEnd { .. } => {
                    self.turns += 1;
                    self.turns_pending = true;
                }
                Record::Checkpoint { .. } => {}
            }
            // Images keep their sha256 and path in the line; their bytes go beside it, once.
            let stashed = super::images::stash(
                &super::images::dir(&self.sessions_dir, &self.session_id),
                record,
            )?;
            serde_json::to_writer(
                &mut buf,
                &LineRef {
                    v: RECORD_VERSION,
                    record: stashed.as_ref().unwrap_or(record),
                },
            )
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            buf.push(b'\n');
        }
        if let Err(e) = self
            .file
            .write_all(&buf)
            .and_then(|()| self.file.sync_data())
        {
            self.roll_back(&e);
            return Err(e);
        }
        self.len += buf.len() as u64;
        self.lines = lines;
        self.last_refrozen = last_refrozen;
        self.mode = mode;
        if compaction.is_some() {
            self.index_pending = compaction;
        }
        self.flush_index();
        Ok(())
    }

    /// The session's id.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// Whether a compaction point is on disk in the record but not yet in the index (the
    /// index write failed and is retried on the next append).
    pub fn index_lagging(&self) -> bool {
        self.index_pending.is_some()
    }

    /// A writer for an existing record that resume has read and cut back to `len`; `used` is
    /// the index's turns and whether it has the first prompt.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn resumed(
        session_id: String,
        sessions_dir: PathBuf,
        path: PathBuf,
        file: File,
        lock: SessionLock,
        len: u64,
        lines: u64,
        last_refrozen: Option<u64>,
        mode: Option<Mode>,
        used: (u64, bool),
    ) -> SessionWriter {
        SessionWriter {
            session_id,
            sessions_dir,
            path,
            file,
            lock,
            len,
            lines,
            last_refrozen,
            mode,
            index_pending: None,
            poisoned: None,
            unsettled: None,
            project: String::new(),
            turns: used.0,
            prompted: used.1,
            first_prompt_pending: None,
            turns_pending: false,
            used_ms: 0,
            discard_unused: false,
        }
    }

    /// Cut a failed append's partial bytes off, or poison the writer if that fails too.
    fn roll_back(&mut self, cause: &io::Error) {
        let cut = self
            .file
            .set_len(self.len)
            .and_then(|()| self.file.sync_data());
        if let Err(e) = cut {
            self.poisoned = Some(format!(
                "append failed ({cause}) and the partial write could not be removed ({e})"
            ));
        }
    }

    /// Write what the index lacks: a compaction point, the first prompt, the turns ended (and
    /// with each, the session's last use). A failure is retried on the next append.
    fn flush_index(&mut self) {
        let point = self.index_pending;
        let first = self.first_prompt_pending.clone();
        if point.is_none() && first.is_none() && !self.turns_pending {
            return;
        }
        let (id, turns) = (self.session_id.clone(), self.turns);
        let used = if self.used_ms > 0 {
            self.used_ms
        } else {
            now_ms()
        };
        let result = update_index(&self.sessions_dir, &id, |index| {
            if let Some(entry) = index.sessions.iter_mut().find(|e| e.id == id) {
                if point.is_some() {
                    entry.compaction = point;
                }
                if first.is_some() && entry.first_prompt.is_none() {
                    entry.first_prompt = first;
                }
                entry.turns = Some(entry.turns.unwrap_or(0).max(turns));
                entry.updated_ms = entry.updated_ms.max(used);
            }
        });
        if result.is_ok() {
            self.index_pending = None;
            if self.first_prompt_pending.take().is_some() {
                self.prompted = true;
            }
            self.turns_pending = false;
        }
    }

    /// Remove this new session (its record, lock file and index entry) when the writer ends
    /// with no prompt ever admitted: a session in which nothing was sent leaves nothing behind.
    pub fn discard_when_unused(&mut self) {
        self.discard_unused = true;
    }

    /// Whether a prompt was ever admitted in this session.
    pub fn prompted(&self) -> bool {
        self.prompted || self.first_prompt_pending.is_some()
    }
}

impl Drop for SessionWriter {
    /// See [`SessionWriter::discard_when_unused`] (a crash leaves such a session behind, and its
    /// index entry, with no first prompt, is skipped by `--continue` and the list).
    fn drop(&mut self) {
        if !self.discard_unused || self.prompted() || self.turns > 0 || self.poisoned.is_some() {
            return;
        }
        if self.unsettled.is_none() {
            let id = self.session_id.clone();
            let _ = update_index(&self.sessions_dir, &id, |index| {
                index.sessions.retain(|e| e.id != id);
            });
        }
        let _ = std::fs::remove_file(&self.path);
        let _ = std::fs::remove_file(self.lock.path());
    }
}

/// The one-line first prompt of a message, if it is a prompt (a user message with said text
/// and no tool result).
fn prompt_of(message: &openmax_core::conversation::Message) -> Option<String> {
    use openmax_core::conversation::{Block, Role};
    if message.role != Role::User
        || message
            .content
            .iter()
            .any(|b| matches!(b, Block::ToolResult { .. }))
    {
        return None;
    }
    let said = message.said_text();
    (!said.trim().is_empty()).then(|| super::index::one_line(&said))
}

/// A [`RecordLine`] by reference: the same JSON without cloning the record.
#[derive(Serialize)]
struct LineRef<'a> {
    v: u32,
    #[serde(flatten)]
    record: &'a Record,
}

/// A session id becomes file names: `[A-Za-z0-9._-]`, 1 to 128 characters, not starting with
/// a dot.
fn check_id(id: &str) -> Result<(), StoreError> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
    if ok {
        Ok(())
    } else {
        Err(StoreError::Invalid(format!(
            "session id {id:?} is not usable as a file name ([A-Za-z0-9._-], not starting with '.')"
        )))
    }
}
