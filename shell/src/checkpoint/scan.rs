//! Reading the project into a [`Snapshot`]: every path the project's ignore rules keep
//! (`.gitignore`, `.ignore`, `.git/info/exclude`, the global excludes, as `list_dir` and `grep`
//! walk), with each file's bytes stored as an object; the names (only) of what they exclude, so
//! undo can remove what a turn created there; and, with their bytes, the excluded paths a file
//! tool wrote in the turn (`extra`). `.git` is never entered.
//!
//! Incremental: a file whose size, mtime, ctime, inode and mode match the stat cache is not
//! read again. What cannot be recorded (a file over the size cap, past the store's cap,
//! unreadable, a name that is not UTF-8, a socket or device) is left out and listed; the
//! checkpoint then says it is partial.

use std::collections::{BTreeSet, HashSet};
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::cache::{Cache, Stat};
use super::manifest::{now_ns, Left};
use super::store::Store;
use super::tree::{join, Node, Snapshot};
use super::Caps;

/// What a scan read.
#[derive(Debug, Default)]
pub struct Scanned {
    pub snap: Snapshot,
    /// Files recorded with their bytes, and their total size.
    pub files: u64,
    pub bytes: u64,
    /// Bytes of new objects written.
    pub added: u64,
    /// What was left out (each path once).
    pub left: Vec<Left>,
    /// Excluded names listed.
    pub ignored: u64,
    /// The stat cache for the next scan.
    pub cache: Cache,
}

/// Scan `project` into the store. `store_size` is the store's size before; `extra` are
/// excluded paths to record with their bytes.
pub fn scan(
    project: &Path,
    store: &Store,
    old: &Cache,
    caps: &Caps,
    extra: &BTreeSet<String>,
    store_size: u64,
) -> Scanned {
    let started = now_ns();
    let mut out = Scanned::default();
    let mut seen: HashSet<String> = HashSet::new();
    let mut size = store_size;
    for item in crate::walk::builder(project, true).build() {
        let entry = match item {
            Ok(e) => e,
            Err(e) => {
                out.left.push(Left::new("", format!("not read: {e}")));
                continue;
            }
        };
        if entry.depth() == 0 {
            continue;
        }
        let Some(rel) = rel_of(project, entry.path()) else {
            out.left.push(Left::new(
                &entry.path().to_string_lossy(),
                "its name is not UTF-8".into(),
            ));
            continue;
        };
        seen.insert(rel.clone());
        record(
            project, &rel, old, caps, store, &mut size, started, &mut out,
        );
    }
    list_excluded(project, caps, &seen, &mut out);
    for p in extra {
        let parent = super::tree::parent(p);
        let placed = parent.is_empty() || out.snap.contains_key(parent);
        if placed && matches!(out.snap.get(p), Some(Node::Ignored { dir: false }) | None) {
            out.snap.remove(p);
            record(project, p, old, caps, store, &mut size, started, &mut out);
        }
    }
    out
}

/// Record the path `rel`: a directory, a link, or a file with its bytes.
#[allow(clippy::too_many_arguments)]
fn record(
    project: &Path,
    rel: &str,
    old: &Cache,
    caps: &Caps,
    store: &Store,
    size: &mut u64,
    started: i128,
    out: &mut Scanned,
) {
    let path = project.join(rel);
    let meta = match fs::symlink_metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
        Err(e) => return out.left.push(Left::new(rel, format!("not read: {e}"))),
    };
    let ft = meta.file_type();
    if ft.is_dir() {
        out.snap.insert(
            rel.to_string(),
            Node::Dir {
                mode: meta.mode() & 0o7777,
            },
        );
    } else if ft.is_symlink() {
        match fs::read_link(&path) {
            Ok(t) => match t.to_str() {
                Some(t) => {
                    out.snap.insert(
                        rel.to_string(),
                        Node::Link {
                            target: t.to_string(),
                        },
                    );
                }
                None => out
                    .left
                    .push(Left::new(rel, "its link target is not UTF-8".into())),
            },
            Err(e) => out.left.push(Left::new(rel, format!("not read: {e}"))),
        }
    } else if ft.is_file() {
        let stat = Stat::of(&meta);
        if stat.size > caps.max_file_bytes {
            return out.left.push(Left::new(
                rel,
                format!(
                    "{} is over the largest file recorded ([checkpoints] max_file_mb = {})",
                    human_bytes(stat.size),
                    caps.max_file_bytes >> 20
                ),
            ));
        }
        let hash = match old.get(rel) {
            Some((s, h)) if *s == stat => h.clone(),
            _ => {
                let max = caps.max_store_bytes;
                let mut admit = |n: u64| {
                    if size.saturating_add(n) > max {
                        Err(format!(
                            "the checkpoint store is full ([checkpoints] max_store_mb = {}; \
                             `openmax undo --gc` removes old checkpoints)",
                            max >> 20
                        ))
                    } else {
                        Ok(())
                    }
                };
                match store.put_file(&path, &mut admit) {
                    Ok(Ok((hash, _, added))) => {
                        *size += added;
                        out.added += added;
                        hash
                    }
                    Ok(Err(why)) => return out.left.push(Left::new(rel, why)),
                    Err(e) => return out.left.push(Left::new(rel, format!("not recorded: {e}"))),
                }
            }
        };
        if stat.settled(started) {
            out.cache.insert(rel.to_string(), (stat, hash.clone()));
        }
        out.files += 1;
        out.bytes += stat.size;
        out.snap.insert(
            rel.to_string(),
            Node::File {
                hash,
                size: stat.size,
                mode: stat.mode,
            },
        );
    } else {
        out.left.push(Left::new(
            rel,
            "not a file, directory or symbolic link (a socket, pipe or device)".into(),
        ));
    }
}

/// The names the ignore rules excluded: in every recorded directory, the entries the walk did
/// not yield, and beneath an excluded directory everything, up to the cap.
fn list_excluded(project: &Path, caps: &Caps, seen: &HashSet<String>, out: &mut Scanned) {
    let mut dirs: Vec<String> = vec![String::new()];
    dirs.extend(
        out.snap
            .iter()
            .filter(|(_, n)| matches!(n, Node::Dir { .. }))
            .map(|(p, _)| p.clone()),
    );
    let mut pending: Vec<String> = Vec::new();
    for d in dirs {
        let Ok(rd) = fs::read_dir(project.join(&d)) else {
            continue;
        };
        for e in rd.flatten() {
            let Some(name) = e.file_name().to_str().map(str::to_string) else {
                continue;
            };
            let rel = join(&d, &name);
            if name == ".git" || seen.contains(&rel) {
                continue;
            }
            if !add_excluded(&rel, &e, caps, out) {
                return;
            }
            if out.snap.get(&rel) == Some(&Node::Ignored { dir: true }) {
                pending.push(rel);
            }
        }
    }
    while let Some(d) = pending.pop() {
        let Ok(rd) = fs::read_dir(project.join(&d)) else {
            continue;
        };
        for e in rd.flatten() {
            let Some(name) = e.file_name().to_str().map(str::to_string) else {
                continue;
            };
            let rel = join(&d, &name);
            if !add_excluded(&rel, &e, caps, out) {
                return;
            }
            if out.snap.get(&rel) == Some(&Node::Ignored { dir: true }) {
                pending.push(rel);
            }
        }
    }
}

/// List one excluded entry; false once the cap is reached (then it says so, once).
fn add_excluded(rel: &str, e: &fs::DirEntry, caps: &Caps, out: &mut Scanned) -> bool {
    if out.ignored >= caps.max_ignored {
        out.left.push(Left::new(
            rel,
            format!(
                "excluded entries past {} are not listed ([checkpoints] max_ignored_entries): \
                 what a turn creates among them is not removed by undo",
                caps.max_ignored
            ),
        ));
        return false;
    }
    let dir = e.file_type().is_ok_and(|t| t.is_dir());
    out.snap.insert(rel.to_string(), Node::Ignored { dir });
    out.ignored += 1;
    true
}

/// `path` relative to `project`, with `/` separators, when it is UTF-8.
pub fn rel_of(project: &Path, path: &Path) -> Option<String> {
    let rel = path.strip_prefix(project).ok()?;
    let s = rel.to_str()?;
    (!s.is_empty()).then(|| s.to_string())
}

/// `12.0 MiB`, `300 B`.
pub fn human_bytes(n: u64) -> String {
    if n < 1024 {
        format!("{n} B")
    } else if n < 1 << 20 {
        format!("{:.1} KiB", n as f64 / 1024.0)
    } else if n < 1 << 30 {
        format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64)
    } else {
        format!("{:.1} GiB", n as f64 / (1u64 << 30) as f64)
    }
}
