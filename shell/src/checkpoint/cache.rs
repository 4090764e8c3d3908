//! The stat cache that makes a checkpoint incremental: for each file the last checkpoint of
//! the project read, its size, mtime, ctime, inode and mode, and the hash of its bytes. A file
//! whose stat still matches is not read again.
//!
//! The cache is only a shortcut: a missing, torn or foreign file reads as empty (every file is
//! read again), and it is written without fsync. An entry is kept only when the file's mtime
//! and ctime are at least [`RACY_NS`] older than the scan that read it, so a write in the same
//! timestamp tick as that scan can never hide behind a matching stat. Every hash in it names an
//! object a manifest named when it was written; a collection keeps those objects too.
//!
//! Format: the line `openmax-stat-cache 1`, then `size mtime_ns ctime_ns ino mode hash path`
//! per file (the path last, as it may hold spaces; a path with a newline is not cached).
//!
//! In memory the entries are kept by directory, then by name, as a scan reads them: a scan
//! finds a directory's entries once and each file by its name, and moves them into the cache
//! it builds for the next scan rather than copying them.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;

/// How much older than the scan a file's times must be for its entry to be kept.
pub const RACY_NS: i128 = 2_000_000_000;

const HEADER: &str = "openmax-stat-cache 1";

/// What identifies a file's bytes without reading them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub size: u64,
    pub mtime_ns: i128,
    pub ctime_ns: i128,
    pub ino: u64,
    pub mode: u32,
}

impl Stat {
    /// From a file's metadata (not followed).
    pub fn of(m: &std::fs::Metadata) -> Stat {
        use std::os::unix::fs::MetadataExt;
        Stat {
            size: m.size(),
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
            ctime_ns: i128::from(m.ctime()) * 1_000_000_000 + i128::from(m.ctime_nsec()),
            ino: m.ino(),
            mode: m.mode() & 0o7777,
        }
    }

    /// From an `lstat` (`fstatat`) result: the same fields as [`Stat::of`].
    // The field types differ between targets; the conversions are no-ops on some.
    #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
    pub fn of_raw(st: &rustix::fs::Stat) -> Stat {
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        Stat {
            size: st.st_size as u64,
            mtime_ns: ns(st.st_mtime as i64, st.st_mtime_nsec as i64),
            ctime_ns: ns(st.st_ctime as i64, st.st_ctime_nsec as i64),
            ino: st.st_ino as u64,
            mode: (st.st_mode as u32) & 0o7777,
        }
    }

    /// Whether a scan that started at `scan_ns` may keep this stat in the cache.
    pub fn settled(&self, scan_ns: i128) -> bool {
        self.mtime_ns.max(self.ctime_ns) + RACY_NS <= scan_ns
    }
}

/// One directory's entries: name → (stat, hash).
pub type DirCache = BTreeMap<String, (Stat, String)>;

/// The stat cache: directory (`""` the root) → its files' entries.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Cache {
    dirs: BTreeMap<String, DirCache>,
}

impl Cache {
    /// An empty cache.
    pub fn new() -> Cache {
        Cache::default()
    }

    /// The entry of the file at `path`.
    pub fn get(&self, path: &str) -> Option<&(Stat, String)> {
        let (dir, name) = split(path);
        self.dirs.get(dir)?.get(name)
    }

    /// Set the entry of the file at `path`.
    pub fn insert(&mut self, path: &str, stat: Stat, hash: String) {
        let (dir, name) = split(path);
        self.dirs
            .entry(dir.to_string())
            .or_default()
            .insert(name.to_string(), (stat, hash));
    }

    /// Take out the entries of the directory `dir` (empty when it has none).
    pub fn take_dir(&mut self, dir: &str) -> DirCache {
        self.dirs.remove(dir).unwrap_or_default()
    }

    /// Set the entries of the directory `dir` (nothing is kept for an empty one).
    pub fn put_dir(&mut self, dir: String, entries: DirCache) {
        if !entries.is_empty() {
            self.dirs.insert(dir, entries);
        }
    }

    /// How many files it holds.
    pub fn len(&self) -> usize {
        self.dirs.values().map(BTreeMap::len).sum()
    }

    /// Whether it holds no file.
    pub fn is_empty(&self) -> bool {
        self.dirs.values().all(BTreeMap::is_empty)
    }

    /// Every entry: (path, stat, hash).
    pub fn iter(&self) -> impl Iterator<Item = (String, &Stat, &str)> {
        self.dirs.iter().flat_map(|(dir, entries)| {
            entries
                .iter()
                .map(move |(name, (s, h))| (super::tree::join(dir, name), s, h.as_str()))
        })
    }

    /// The hashes it names.
    pub fn hashes(&self) -> impl Iterator<Item = &str> {
        self.dirs
            .values()
            .flat_map(|entries| entries.values().map(|(_, h)| h.as_str()))
    }
}

/// A path's directory and name.
fn split(path: &str) -> (&str, &str) {
    path.rsplit_once('/').unwrap_or(("", path))
}

/// Read the cache at `path` (empty when missing or not ours).
pub fn read(path: &Path) -> Cache {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Cache::new();
    };
    parse(&text).unwrap_or_default()
}

fn parse(text: &str) -> Option<Cache> {
    let mut lines = text.lines();
    if lines.next()? != HEADER {
        return None;
    }
    let mut out = Cache::new();
    for line in lines {
        let mut f = line.splitn(7, ' ');
        let stat = Stat {
            size: f.next()?.parse().ok()?,
            mtime_ns: f.next()?.parse().ok()?,
            ctime_ns: f.next()?.parse().ok()?,
            ino: f.next()?.parse().ok()?,
            mode: f.next()?.parse().ok()?,
        };
        let hash = f.next()?;
        if !super::store::is_hash(hash) {
            return None;
        }
        out.insert(f.next()?, stat, hash.to_string());
    }
    Some(out)
}

/// Replace the cache at `path` (temp file and rename; no fsync, it is only a cache).
pub fn write(path: &Path, cache: &Cache) -> io::Result<()> {
    let mut text = String::with_capacity(cache.len() * 120 + 32);
    text.push_str(HEADER);
    text.push('\n');
    for (p, s, h) in cache.iter() {
        if p.contains('\n') {
            continue;
        }
        use std::fmt::Write;
        let _ = writeln!(
            text,
            "{} {} {} {} {} {h} {p}",
            s.size, s.mtime_ns, s.ctime_ns, s.ino, s.mode
        );
    }
    super::store::replace_file(path, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_garbage_reads_empty() {
        let dir = crate::scratch::path("cache");
        let path = dir.join("cache");
        let mut c = Cache::new();
        let s = Stat {
            size: 3,
            mtime_ns: 1,
            ctime_ns: -2,
            ino: 4,
            mode: 0o644,
        };
        c.insert("a b/c d.txt", s, "a".repeat(64));
        c.insert("bad\nname", s, "b".repeat(64));
        c.insert("top", s, "c".repeat(64));
        write(&path, &c).unwrap();
        let back = read(&path);
        assert_eq!(back.len(), 2);
        assert_eq!(back.get("a b/c d.txt"), Some(&(s, "a".repeat(64))));
        assert_eq!(back.get("top"), Some(&(s, "c".repeat(64))));
        assert_eq!(back.hashes().count(), 2);
        std::fs::write(&path, "openmax-stat-cache 1\n1 2 x\n").unwrap();
        assert!(read(&path).is_empty());
        assert!(read(&dir.join("missing")).is_empty());
        assert!(s.settled(RACY_NS + 1) && !s.settled(RACY_NS - 10));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
