//! A checkpoint's manifest: `projects/<project>/checkpoints/manifests/<id>.json` under
//! `$OPENMAX_HOME`, naming the root listing of the project's paths (see [`super::tree`]) and
//! what the checkpoint noted beside them: `HEAD`, what it left out, and the excluded paths a
//! file tool wrote (recorded with their bytes).
//!
//! A manifest is replaced whole (temp file, rename; not fsynced, as the objects it names are
//! not: see [`super::store`]): when a file tool is about to write
//! an excluded path, its bytes are added to the turn's `before` checkpoint, which then names a
//! new root listing.

use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::git::Head;

/// The manifest format version.
pub const VERSION: u32 = 1;

/// How many left-out paths a manifest lists (the count says how many there were).
pub const LEFT_LISTED: usize = 100;

/// A path a checkpoint could not record, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Left {
    pub path: String,
    pub why: String,
}

impl Left {
    pub fn new(path: &str, why: String) -> Left {
        Left {
            path: path.to_string(),
            why,
        }
    }
}

/// One checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub v: u32,
    pub id: String,
    /// The session and turn it belongs to, and which of the turn's checkpoints it is
    /// (`before`, `after`, or `undo_before` / `undo_after` around an undo).
    pub session: String,
    pub turn: u64,
    pub moment: String,
    pub at_ms: u64,
    /// The root listing.
    pub root: String,
    /// Files recorded with their bytes, and their total size.
    pub files: u64,
    pub bytes: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git: Option<Head>,
    /// What was left out (at most [`LEFT_LISTED`]) and how many were.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left: Vec<Left>,
    #[serde(default)]
    pub left_count: u64,
    /// Excluded paths recorded with their bytes because a file tool wrote them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub captured: Vec<String>,
}

impl Manifest {
    /// Whether something was left out.
    pub fn partial(&self) -> bool {
        self.left_count > 0
    }

    /// One line saying what was left out, when something was.
    pub fn partial_note(&self) -> Option<String> {
        if !self.partial() {
            return None;
        }
        let shown: Vec<String> = self
            .left
            .iter()
            .take(3)
            .map(|l| {
                if l.path.is_empty() {
                    l.why.clone()
                } else {
                    format!("{} ({})", l.path, l.why)
                }
            })
            .collect();
        let more = self.left_count.saturating_sub(shown.len() as u64);
        let mut s = format!(
            "the checkpoint before turn {} is partial: {} path{} left out: {}",
            self.turn,
            self.left_count,
            if self.left_count == 1 { "" } else { "s" },
            shown.join("; ")
        );
        if more > 0 {
            s.push_str(&format!("; and {more} more"));
        }
        s.push_str(" (undo cannot restore them)");
        Some(s)
    }
}

/// Read the manifest `id` from `dir` (`…/checkpoints/manifests`).
pub fn read(dir: &Path, id: &str) -> io::Result<Manifest> {
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{id:?} is not a checkpoint id"),
        ));
    }
    let path = dir.join(format!("{id}.json"));
    let bytes = std::fs::read(&path).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("checkpoint {id}: cannot read {}: {e}", path.display()),
        )
    })?;
    let m: Manifest = serde_json::from_slice(&bytes).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("checkpoint {id}: {} is not a manifest: {e}", path.display()),
        )
    })?;
    if m.v != VERSION {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "checkpoint {id}: manifest version {} (this openmax reads {VERSION})",
                m.v
            ),
        ));
    }
    Ok(m)
}

/// Write (or replace) a manifest in `dir`.
pub fn write(dir: &Path, m: &Manifest) -> io::Result<()> {
    let bytes = serde_json::to_vec(m).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    super::store::replace_file(&dir.join(format!("{}.json", m.id)), &bytes)
}

/// Nanoseconds since the Unix epoch, now.
pub fn now_ns() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i128)
        .unwrap_or(0)
}

/// A new checkpoint id: 16 hex of sha256(time, pid, counter).
pub fn new_id() -> String {
    use sha2::{Digest, Sha256};
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let mut h = Sha256::new();
    h.update(now_ns().to_le_bytes());
    h.update(std::process::id().to_le_bytes());
    h.update(N.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    crate::digest::hex(&h.finalize()[..8])
}
