//! Reading the project into a [`Tree`]: every path the project's ignore rules keep
//! (`.gitignore`, `.ignore`, `.git/info/exclude`, the global excludes, as `list_dir` and `grep`
//! walk), with each file's bytes stored as an object; the names (only) of what they exclude, so
//! undo can remove what a turn created there; and, with their bytes, the excluded paths a file
//! tool wrote in the turn (`extra`). `.git` is never entered.
//!
//! One walk ([`super::walk`], on every core) reads each directory once beside the ignore
//! walker and stats its entries by name; what it kept is recorded here, and the entries it did
//! not keep are the excluded names, listed in path order of their directories as they were read
//! (beneath an excluded directory, everything), up to the cap.
//!
//! Incremental: a file whose size, mtime, ctime, inode and mode match the stat cache is not
//! read again. What cannot be recorded (a file over the size cap, past the store's cap,
//! unreadable, a name that is not UTF-8, a socket or device) is left out and listed; the
//! checkpoint then says it is partial.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::path::Path;

use super::cache::{Cache, DirCache, Stat};
use super::manifest::{now_ns, Left};
use super::store::Store;
use super::tree::{join, Node, Tree};
use super::walk::{self, Probe};
use super::Caps;

/// What a scan read.
#[derive(Debug, Default)]
pub struct Scanned {
    pub tree: Tree,
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

impl Scanned {
    /// The node recorded at `path`.
    pub fn node(&self, path: &str) -> Option<&Node> {
        super::tree::node_in(&self.tree, path)
    }
}

/// Scan `project` into the store. `old` is the stat cache of the last scan; `store_size` is the
/// store's size before; `extra` are excluded paths to record with their bytes.
pub fn scan(
    project: &Path,
    store: &Store,
    old: Cache,
    caps: &Caps,
    extra: &BTreeSet<String>,
    store_size: u64,
) -> Scanned {
    let walked = walk::walk(project);
    let mut out = Scanned {
        left: walked.left,
        ..Scanned::default()
    };
    out.tree.insert(String::new(), BTreeMap::new());
    let mut rec = Recorder {
        project,
        store,
        caps,
        size: store_size,
        started: now_ns(),
        old,
    };
    let mut kept = walked.kept;
    // What each recorded directory holds beside what the walker kept: (name, a directory).
    let mut excluded: HashMap<String, Vec<(String, bool)>> = HashMap::new();
    for (dir, entries) in walked.dirs {
        let mut names = kept.remove(&dir).unwrap_or_default();
        let mut d = rec.open(&dir, &mut out);
        let mut others = Vec::new();
        for e in entries.into_iter().flatten() {
            if names.remove(&e.name) {
                rec.record(&mut d, e.name, e.probe, &mut out);
            } else {
                let is_dir = e.is_dir();
                others.push((e.name, is_dir));
            }
        }
        // Kept entries the directory's own reading missed (it failed, or they came after it).
        for name in names {
            let probe = walk::probe_path(&project.join(join(&dir, &name)));
            rec.record(&mut d, name, probe, &mut out);
        }
        rec.close(d, &mut out);
        excluded.insert(dir, others);
    }
    // Kept entries of a directory not read at all (none, as the walker reads a directory
    // before its entries): recorded by their paths.
    for (dir, names) in kept {
        let mut d = rec.open(&dir, &mut out);
        for name in names {
            let probe = walk::probe_path(&project.join(join(&dir, &name)));
            rec.record(&mut d, name, probe, &mut out);
        }
        rec.close(d, &mut out);
    }
    list_excluded(project, caps, excluded, &mut out);
    for p in extra {
        let parent = super::tree::parent(p);
        let placed = parent.is_empty() || out.node(parent).is_some();
        if placed && matches!(out.node(p), Some(Node::Ignored { dir: false }) | None) {
            let name = &p[p.rfind('/').map_or(0, |i| i + 1)..];
            let mut d = rec.open(parent, &mut out);
            d.nodes.remove(name);
            let probe = walk::probe_path(&project.join(p));
            rec.record(&mut d, name.to_string(), probe, &mut out);
            rec.close(d, &mut out);
        }
    }
    // Every directory has a listing, an empty one when nothing was read of it.
    let dirs: Vec<String> = out
        .tree
        .iter()
        .flat_map(|(d, nodes)| {
            nodes
                .iter()
                .filter(|(_, n)| n.is_dir())
                .map(move |(name, _)| join(d, name))
        })
        .collect();
    for d in dirs {
        out.tree.entry(d).or_default();
    }
    // The walk's order depends on its threads: the paths left out are listed in path order.
    out.left.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// What records paths: the store, the caps and the stat cache of the last scan.
struct Recorder<'a> {
    project: &'a Path,
    store: &'a Store,
    caps: &'a Caps,
    /// The store's size so far.
    size: u64,
    /// When the scan started (a file changed since is not cached).
    started: i128,
    old: Cache,
}

/// One directory being recorded: its nodes, and its entries of the old and the new cache.
/// What is recorded is gathered in vectors and made maps once, when the directory is closed
/// (sorting and building a map at once costs less than inserting each entry).
struct Open {
    dir: String,
    nodes: BTreeMap<String, Node>,
    old: DirCache,
    new: DirCache,
    added_nodes: Vec<(String, Node)>,
    added_cache: Vec<(String, (Stat, String))>,
}

impl Recorder<'_> {
    fn open(&mut self, dir: &str, out: &mut Scanned) -> Open {
        Open {
            dir: dir.to_string(),
            nodes: out.tree.remove(dir).unwrap_or_default(),
            old: self.old.take_dir(dir),
            new: out.cache.take_dir(dir),
            added_nodes: Vec::new(),
            added_cache: Vec::new(),
        }
    }

    fn close(&mut self, mut d: Open, out: &mut Scanned) {
        // The old entries left may still serve an excluded file a tool wrote (`extra`).
        self.old.put_dir(d.dir.clone(), d.old);
        out.cache
            .put_dir(d.dir.clone(), into_map(d.new, d.added_cache));
        d.nodes = into_map(d.nodes, d.added_nodes);
        out.tree.insert(d.dir, d.nodes);
    }

    /// Record the entry `name` of `d`: a directory, a link, or a file with its bytes.
    fn record(&mut self, d: &mut Open, name: String, probe: Probe, out: &mut Scanned) {
        let node = match probe {
            Probe::Gone => return,
            Probe::Failed(why) => return out.left.push(Left::new(&join(&d.dir, &name), why)),
            Probe::Dir { mode } => Node::Dir { mode },
            Probe::Link(Ok(target)) => Node::Link { target },
            Probe::Link(Err(why)) => return out.left.push(Left::new(&join(&d.dir, &name), why)),
            Probe::Other => {
                return out.left.push(Left::new(
                    &join(&d.dir, &name),
                    "not a file, directory or symbolic link (a socket, pipe or device)".into(),
                ))
            }
            Probe::File(stat) => {
                let caps = self.caps;
                if stat.size > caps.max_file_bytes {
                    return out.left.push(Left::new(
                        &join(&d.dir, &name),
                        format!(
                            "{} is over the largest file recorded ([checkpoints] max_file_mb = {})",
                            human_bytes(stat.size),
                            caps.max_file_bytes >> 20
                        ),
                    ));
                }
                let (key, hash) = match d.old.remove_entry(&name) {
                    Some((key, (s, h))) if s == stat => (key, h),
                    _ => {
                        let rel = join(&d.dir, &name);
                        match self.read(&rel, out) {
                            Some(h) => (name.clone(), h),
                            None => return,
                        }
                    }
                };
                let node = Node::File {
                    hash: hash.clone(),
                    size: stat.size,
                    mode: stat.mode,
                };
                if stat.settled(self.started) {
                    d.added_cache.push((key, (stat, hash)));
                }
                out.files += 1;
                out.bytes += stat.size;
                node
            }
        };
        d.added_nodes.push((name, node));
    }

    /// Store the bytes of the file `rel`; its hash, or `None` when it is left out (and listed).
    fn read(&mut self, rel: &str, out: &mut Scanned) -> Option<String> {
        let max = self.caps.max_store_bytes;
        let size = self.size;
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
        match self.store.put_file(&self.project.join(rel), &mut admit) {
            Ok(Ok((hash, _, added))) => {
                self.size += added;
                out.added += added;
                Some(hash)
            }
            Ok(Err(why)) => {
                out.left.push(Left::new(rel, why));
                None
            }
            Err(e) => {
                out.left.push(Left::new(rel, format!("not recorded: {e}")));
                None
            }
        }
    }
}

/// `map` with `added` (later entries replace earlier ones, as inserting them in turn would).
fn into_map<V>(mut map: BTreeMap<String, V>, added: Vec<(String, V)>) -> BTreeMap<String, V> {
    if map.is_empty() {
        // Built at once from the sorted entries; of equal names the last is kept.
        added.into_iter().collect()
    } else {
        map.extend(added);
        map
    }
}

/// List the names the ignore rules excluded: in every recorded directory (in path order, the
/// root first) the entries the walk did not keep, in the order they were read, then beneath
/// an excluded directory everything, up to the cap.
fn list_excluded(
    project: &Path,
    caps: &Caps,
    mut excluded: HashMap<String, Vec<(String, bool)>>,
    out: &mut Scanned,
) {
    let dirs: Vec<String> = out
        .tree
        .keys()
        .filter(|d| d.is_empty() || matches!(out.node(d), Some(Node::Dir { .. })))
        .cloned()
        .collect();
    let mut pending: Vec<String> = Vec::new();
    for d in dirs {
        for (name, is_dir) in excluded.remove(&d).unwrap_or_default() {
            if !add_excluded(&d, name, is_dir, caps, out, &mut pending) {
                return;
            }
        }
    }
    while let Some(d) = pending.pop() {
        let Ok(rd) = fs::read_dir(project.join(&d)) else {
            continue;
        };
        for e in rd.flatten() {
            let Ok(name) = e.file_name().into_string() else {
                continue;
            };
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            if !add_excluded(&d, name, is_dir, caps, out, &mut pending) {
                return;
            }
        }
    }
}

/// List one excluded entry of `dir` (an excluded directory goes to `pending`, to be listed
/// in turn); false once the cap is reached (then it says so, once).
fn add_excluded(
    dir: &str,
    name: String,
    is_dir: bool,
    caps: &Caps,
    out: &mut Scanned,
    pending: &mut Vec<String>,
) -> bool {
    if out.ignored >= caps.max_ignored {
        out.left.push(Left::new(
            &join(dir, &name),
            format!(
                "excluded entries past {} are not listed ([checkpoints] max_ignored_entries): \
                 what a turn creates among them is not removed by undo",
                caps.max_ignored
            ),
        ));
        return false;
    }
    if is_dir {
        let rel = join(dir, &name);
        out.tree.entry(rel.clone()).or_default();
        pending.push(rel);
    }
    out.tree
        .entry(dir.to_string())
        .or_default()
        .insert(name, Node::Ignored { dir: is_dir });
    out.ignored += 1;
    true
}

/// `path` relative to `project`, with `/` separators, when it is UTF-8.
pub fn rel_of<'a>(project: &Path, path: &'a Path) -> Option<&'a str> {
    let rel = path.strip_prefix(project).ok()?;
    let s = rel.to_str()?;
    (!s.is_empty()).then_some(s)
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
