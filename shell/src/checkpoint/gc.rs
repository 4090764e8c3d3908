//! Collection: the checkpoints of deleted sessions and those older than `[checkpoints]
//! max_age_days` go, then every object no manifest (and no stat cache) names.
//!
//! 1. Per project, under its lock (no checkpoint or undo of it runs meanwhile): a session's log
//!    goes with its record (`sessions/<id>.jsonl` deleted); lines older than the age go; a
//!    manifest no remaining line names goes.
//! 2. Under the store's lock held exclusively (no checkpoint writes objects meanwhile): every
//!    listing and file the remaining manifests reach is marked, with the hashes of the stat
//!    caches; the rest is deleted, with temp files left by a crash; the size is recounted.
//!
//! `openmax undo --gc` runs it; a session runs it at start, on a thread of its own, once a day.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::Path;

use super::store::Store;
use super::tree::{Node, Reader};

/// What a collection removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Collected {
    pub logs: u64,
    pub checkpoints: u64,
    pub objects: u64,
    pub bytes: u64,
    /// The store's size after.
    pub size: u64,
}

/// Touched at the end of every collection: a process's memory of the store (see
/// [`super::Memory`]) is dropped when it changed.
pub const DONE: &str = "gc.done";

/// How often a session starts an automatic collection.
pub const AUTO_EVERY_MS: u64 = 24 * 3600 * 1000;

/// Collect the store under the state root `home`. `max_age_ms` 0 keeps checkpoints whatever
/// their age.
pub fn collect(home: &Path, max_age_ms: u64, now_ms: u64) -> io::Result<Collected> {
    let mut out = Collected::default();
    let projects = home.join("projects");
    let dirs: Vec<_> = match fs::read_dir(&projects) {
        Ok(d) => d.flatten().map(|e| e.path()).collect(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e),
    };
    for d in &dirs {
        let cp = d.join("checkpoints");
        if cp.is_dir() {
            prune_project(&cp, &d.join("sessions"), max_age_ms, now_ms, &mut out)?;
        }
    }
    let store = Store::new(home);
    let _lock = store.exclusive()?;
    let mut marked: BTreeSet<String> = BTreeSet::new();
    let mut reader = Reader::new(&store);
    for d in &dirs {
        let cp = d.join("checkpoints");
        for (_, m) in manifests(&cp.join("manifests")) {
            mark(&mut reader, &m.root, &mut marked)?;
        }
        let cache = super::cache::read(&cp.join("cache"));
        marked.extend(cache.hashes().map(str::to_string));
    }
    for (hash, path, len) in store.list()? {
        if !marked.contains(&hash) && fs::remove_file(&path).is_ok() {
            out.objects += 1;
            out.bytes += len;
        }
    }
    for p in store.strays()? {
        let _ = fs::remove_file(p);
    }
    out.size = store.count_size()?;
    store.set_size(out.size)?;
    super::store::replace_file(&store.root().join(DONE), now_ms.to_string().as_bytes())?;
    Ok(out)
}

/// Mark the listing `root` and everything it reaches (a marked listing is not read again).
fn mark(reader: &mut Reader<'_>, root: &str, marked: &mut BTreeSet<String>) -> io::Result<()> {
    if !marked.insert(root.to_string()) {
        return Ok(());
    }
    let listing = match reader.listing(root) {
        Ok(l) => l,
        // A manifest naming a missing listing keeps nothing more.
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for (_, (node, sub)) in listing {
        if let Node::File { hash, .. } = node {
            marked.insert(hash);
        }
        if let Some(s) = sub {
            mark(reader, &s, marked)?;
        }
    }
    Ok(())
}

/// Every manifest in `dir`: (file, manifest). Unreadable ones are skipped (and kept).
fn manifests(dir: &Path) -> Vec<(std::path::PathBuf, super::manifest::Manifest)> {
    let Ok(rd) = fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            let id = name.strip_suffix(".json")?;
            let m = super::manifest::read(dir, id).ok()?;
            Some((e.path(), m))
        })
        .collect()
}

fn prune_project(
    cp: &Path,
    sessions: &Path,
    max_age_ms: u64,
    now_ms: u64,
    out: &mut Collected,
) -> io::Result<()> {
    let _lock = super::lock_dir(cp)?;
    let mut named: BTreeSet<String> = BTreeSet::new();
    for e in fs::read_dir(cp)?.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let Some(session) = name.strip_suffix(".jsonl") else {
            continue;
        };
        if !sessions.join(format!("{session}.jsonl")).exists() {
            fs::remove_file(e.path())?;
            let _ = fs::remove_file(cp.join(format!("{session}.notes")));
            out.logs += 1;
            continue;
        }
        let Ok(lines) = super::log::lines(cp, session) else {
            // A log this openmax cannot read keeps everything it might name.
            return Ok(());
        };
        let keep: Vec<_> = lines
            .iter()
            .filter(|l| max_age_ms == 0 || super::log::at_ms(l) + max_age_ms >= now_ms)
            .cloned()
            .collect();
        if keep.len() != lines.len() {
            super::log::rewrite(cp, session, &keep)?;
            if keep.is_empty() {
                out.logs += 1;
            }
        }
        named.extend(super::log::ids(&keep));
    }
    for (path, m) in manifests(&cp.join("manifests")) {
        if !named.contains(&m.id) && fs::remove_file(&path).is_ok() {
            out.checkpoints += 1;
        }
    }
    Ok(())
}

/// Run a collection when the last one is older than [`AUTO_EVERY_MS`] (by `gc.stamp`), and
/// only when no checkpoint is being written; errors are ignored (the next session tries again).
pub fn auto(home: &Path, max_age_ms: u64) {
    let stamp = Store::new(home).root().join("gc.stamp");
    let due = match fs::metadata(&stamp).and_then(|m| m.modified()) {
        Ok(t) => t
            .elapsed()
            .map(|e| e.as_millis() as u64 >= AUTO_EVERY_MS)
            .unwrap_or(true),
        Err(_) => Store::new(home).root().is_dir(),
    };
    if !due {
        return;
    }
    if crate::session::write_atomic(&stamp, b"").is_err() {
        return;
    }
    let _ = collect(home, max_age_ms, crate::session::state::now_ms());
}
