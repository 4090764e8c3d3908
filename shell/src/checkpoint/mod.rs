//! Checkpoints of the project for undo, shell changes included: because the sandbox confines
//! every write of the agent's processes to the project and private temp directories, a record
//! of the project's files before a turn's first write is a record of everything the turn can
//! change. The core decides when (`Effect::Checkpoint`, before the first write of a turn and
//! when it ends); this module records, restores and collects. docs/checkpoints.md is the
//! user's account.
//!
//! On disk, under `$OPENMAX_HOME`:
//!
//! ```text
//! checkpoints/objects/ab/cdef…       file contents and directory listings, by sha256 (store)
//! checkpoints/gc.lock, size, gc.stamp
//! projects/<project>/checkpoints/
//!   manifests/<id>.json              one per checkpoint (manifest)
//!   <session>.jsonl                  the session's checkpoints and undos (log)
//!   <session>.notes                  undo notes for the session's next turn (notes)
//!   cache                            the stat cache (cache)
//!   lock                             one checkpoint or undo of the project at a time
//! ```
//!
//! Modules: [`store`] (objects), [`tree`] (paths as listings, diffs), [`scan`] (the project
//! into a snapshot, incrementally with [`cache`], in one [`walk`] on every core),
//! [`manifest`], [`log`], [`git`] (`HEAD`), [`undo`] (what an undo changes, and doing it),
//! [`gc`] (collection), [`worker`] (a session's checkpoints off the event loop), [`notes`].

pub mod apply;
pub mod cache;
pub mod gc;
pub mod git;
pub mod list;
pub mod log;
pub mod manifest;
pub mod notes;
pub mod report;
pub mod scan;
#[cfg(test)]
mod scan_tests;
pub mod store;
pub mod tree;
pub mod undo;
#[cfg(test)]
mod undo_tests;
pub mod walk;
pub mod worker;

use std::collections::BTreeSet;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use manifest::Manifest;
use store::Store;
use tree::Node;

use crate::session::perms::{private_dir_all, private_file};
use crate::session::ProjectState;

/// The limits of the store (`[checkpoints]` in the user config).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// Whether turns are checkpointed at all.
    pub enabled: bool,
    /// The store's total size; past it new contents are not recorded.
    pub max_store_bytes: u64,
    /// The largest file recorded.
    pub max_file_bytes: u64,
    /// Names excluded by the ignore rules listed per checkpoint.
    pub max_ignored: u64,
    /// Checkpoints older than this are collected (0: kept until their session is deleted).
    pub max_age_ms: u64,
}

impl Default for Caps {
    fn default() -> Self {
        Caps {
            enabled: true,
            max_store_bytes: 4 << 30,
            max_file_bytes: 64 << 20,
            max_ignored: 100_000,
            max_age_ms: 30 * 24 * 3600 * 1000,
        }
    }
}

/// Take the lock of a project's checkpoint directory `dir` (waiting for its holder).
pub fn lock_dir(dir: &Path) -> io::Result<File> {
    private_dir_all(dir)?;
    let f = private_file()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(dir.join("lock"))?;
    f.lock()?;
    Ok(f)
}

/// What one process keeps between the checkpoints it takes of a project: the stat cache and
/// the listings last written (so an unchanged directory is not encoded again). Dropped when a
/// collection ran since it was filled (`gc.done` changed), as its hashes may name objects a
/// collection removed.
#[derive(Debug, Default)]
pub struct Memory {
    cache: Option<cache::Cache>,
    written: tree::Written,
    /// `gc.done`'s modification time when the memory was filled.
    gc: Option<std::time::SystemTime>,
}

/// One project's checkpoints.
#[derive(Debug, Clone)]
pub struct Project {
    pub store: Store,
    /// `projects/<project>/checkpoints`.
    pub dir: PathBuf,
    /// The project root (canonical).
    pub root: PathBuf,
    /// The project's session records (`sessions/`), to tell a deleted session.
    pub sessions: PathBuf,
    pub caps: Caps,
    /// Shared by the clones of this value (a session's thread, its `/undo`).
    memory: Arc<Mutex<Memory>>,
}

impl Project {
    /// The checkpoints of the project `state` stands for, under the state root `home`.
    pub fn new(home: &Path, state: &ProjectState, caps: Caps) -> Project {
        Project {
            store: Store::new(home),
            dir: state.dir().join("checkpoints"),
            root: state.project().to_path_buf(),
            sessions: state.sessions_dir(),
            caps,
            memory: Arc::default(),
        }
    }

    /// Where the manifests are.
    pub fn manifests(&self) -> PathBuf {
        self.dir.join("manifests")
    }

    /// Read the manifest `id`.
    pub fn manifest(&self, id: &str) -> io::Result<Manifest> {
        manifest::read(&self.manifests(), id)
    }

    /// The project's lock: one checkpoint, capture or undo at a time.
    pub fn lock(&self) -> io::Result<File> {
        lock_dir(&self.dir)
    }

    /// Take a checkpoint of the project now. The caller holds the project's lock.
    /// `extra`: excluded paths to record with their bytes.
    pub fn take_locked(
        &self,
        session: &str,
        turn: u64,
        moment: &str,
        extra: &BTreeSet<String>,
    ) -> io::Result<Manifest> {
        let _writing = self.store.writing()?;
        let cache_path = self.dir.join("cache");
        let mut memory = match self.memory.lock() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        };
        let gc = std::fs::metadata(self.store.root().join(gc::DONE))
            .and_then(|m| m.modified())
            .ok();
        if memory.gc != gc {
            *memory = Memory {
                gc,
                ..Memory::default()
            };
        }
        let old = match memory.cache.take() {
            Some(c) => c,
            None => cache::read(&cache_path),
        };
        let size = self.store.add_size(0)?;
        let mut s = scan::scan(&self.root, &self.store, old, &self.caps, extra, size);
        let (root, listed) = tree::write_tree(&self.store, &s.tree, &mut memory.written)?;
        let left_count = s.left.len() as u64;
        let mut left = std::mem::take(&mut s.left);
        left.truncate(manifest::LEFT_LISTED);
        let m = Manifest {
            v: manifest::VERSION,
            id: manifest::new_id(),
            session: session.to_string(),
            turn,
            moment: moment.to_string(),
            at_ms: crate::session::state::now_ms(),
            root,
            files: s.files,
            bytes: s.bytes,
            git: git::head(&self.root),
            left,
            left_count,
            captured: extra
                .iter()
                .filter(|p| matches!(s.node(p), Some(Node::File { .. } | Node::Link { .. })))
                .cloned()
                .collect(),
        };
        manifest::write(&self.manifests(), &m)?;
        // Only a shortcut for the next process: written when no turn waits (after a turn, around
        // an undo); a cache that cannot be written costs that process its reads.
        if moment != "before" {
            let _ = cache::write(&cache_path, &s.cache);
        }
        memory.cache = Some(s.cache);
        self.store.add_size(s.added + listed)?;
        Ok(m)
    }

    /// Take a checkpoint, under the project's lock.
    pub fn take(
        &self,
        session: &str,
        turn: u64,
        moment: &str,
        extra: &BTreeSet<String>,
    ) -> io::Result<Manifest> {
        let _lock = self.lock()?;
        self.take_locked(session, turn, moment, extra)
    }

    /// A file tool is about to write `rel`: when the checkpoint `id` lists it only by name
    /// (excluded by the ignore rules), record its bytes in that checkpoint now. Returns
    /// whether it did.
    pub fn capture(&self, id: &str, rel: &str) -> io::Result<bool> {
        let _lock = self.lock()?;
        self.capture_locked(id, rel)
    }

    /// [`Project::capture`] under the project's lock, which the caller holds.
    pub fn capture_locked(&self, id: &str, rel: &str) -> io::Result<bool> {
        let _writing = self.store.writing()?;
        let mut m = self.manifest(id)?;
        let mut reader = tree::Reader::new(&self.store);
        if reader.node_at(&m.root, rel)? != Some(Node::Ignored { dir: false }) {
            return Ok(false);
        }
        let path = self.root.join(rel);
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e),
        };
        let node = if meta.file_type().is_symlink() {
            let t = std::fs::read_link(&path)?;
            Node::Link {
                target: t.to_string_lossy().into_owned(),
            }
        } else if meta.is_file() && meta.len() <= self.caps.max_file_bytes {
            let size = self.store.add_size(0)?;
            let max = self.caps.max_store_bytes;
            let mut admit = |n: u64| {
                if size.saturating_add(n) > max {
                    Err("the checkpoint store is full".to_string())
                } else {
                    Ok(())
                }
            };
            match self.store.put_file(&path, &mut admit)? {
                Ok((hash, size, added)) => {
                    self.store.add_size(added)?;
                    use std::os::unix::fs::MetadataExt;
                    Node::File {
                        hash,
                        size,
                        mode: meta.mode() & 0o7777,
                    }
                }
                Err(_) => return Ok(false),
            }
        } else {
            return Ok(false);
        };
        m.root = tree::replace(&self.store, &m.root, rel, node)?;
        m.captured.push(rel.to_string());
        manifest::write(&self.manifests(), &m)?;
        Ok(true)
    }
}
