//! What a checkpoint records of each path ([`Node`]) and how a project's paths are kept in the
//! store: one listing object per directory, named by the sha256 of its bytes, so a checkpoint
//! of a tree where one file changed adds that file and the listings on its way to the root,
//! and every unchanged directory is shared with the checkpoints before it.
//!
//! A listing is the line `openmax-tree 1`, then one JSON object per entry, sorted by name:
//! `{"n":name,"k":"f","h":sha256,"s":size,"m":mode}` a file, `{"n","k":"l","t":target}` a
//! symbolic link, `{"n","k":"d","h":listing,"m":mode}` a directory, `{"n","k":"i"}` an entry
//! the ignore rules exclude (named only) and `{"n","k":"I","h":listing}` such a directory
//! with its own listing of names.
//!
//! Paths are project-relative with `/` separators; the root is `""`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io;

use serde::{Deserialize, Serialize};

use super::store::Store;
use crate::digest::sha256_hex;

/// What a checkpoint records of one path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    /// A regular file: its bytes (an object), size and permission bits.
    File { hash: String, size: u64, mode: u32 },
    /// A symbolic link and the target it names (not followed).
    Link { target: String },
    /// A directory and its permission bits.
    Dir { mode: u32 },
    /// Excluded by the ignore rules and not written by a file tool: its name is listed (so undo
    /// can remove what a turn created there), its contents are not recorded.
    Ignored { dir: bool },
}

impl Node {
    /// Whether it is a directory (recorded or ignored).
    pub fn is_dir(&self) -> bool {
        matches!(self, Node::Dir { .. } | Node::Ignored { dir: true })
    }

    /// A word for what it is.
    pub fn kind(&self) -> &'static str {
        match self {
            Node::File { .. } => "file",
            Node::Link { .. } => "symlink",
            Node::Dir { .. } => "directory",
            Node::Ignored { dir: true } => "ignored directory",
            Node::Ignored { dir: false } => "ignored entry",
        }
    }
}

/// A project's paths as a checkpoint records them.
pub type Snapshot = BTreeMap<String, Node>;

/// A project's paths by directory, as a scan reads them: each directory (`""` the root) → its
/// entries by name. Every directory has a key, an empty map when it holds nothing recorded.
pub type Tree = BTreeMap<String, BTreeMap<String, Node>>;

/// The node at `path` in `tree`.
pub fn node_in<'a>(tree: &'a Tree, path: &str) -> Option<&'a Node> {
    let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
    tree.get(dir)?.get(name)
}

/// `snap` by directory: a key for every directory in it and every parent of a path.
pub fn by_dir(snap: &Snapshot) -> Tree {
    let mut tree = Tree::new();
    tree.entry(String::new()).or_default();
    for (path, node) in snap {
        if node.is_dir() {
            tree.entry(path.clone()).or_default();
        }
        let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
        tree.entry(dir.to_string())
            .or_default()
            .insert(name.to_string(), node.clone());
    }
    tree
}

/// Every path of `tree` (the inverse of [`by_dir`]).
pub fn flat(tree: &Tree) -> Snapshot {
    tree.iter()
        .flat_map(|(dir, nodes)| {
            nodes
                .iter()
                .map(move |(n, node)| (join(dir, n), node.clone()))
        })
        .collect()
}

const HEADER: &str = "openmax-tree 1";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Entry {
    n: String,
    k: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    h: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    s: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    m: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    t: Option<String>,
}

/// One directory's entries: name → (node, the listing object of a directory).
pub type Listing = BTreeMap<String, (Node, Option<String>)>;

fn bad(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// The bytes of a listing.
pub fn encode(listing: &Listing) -> Vec<u8> {
    let mut out = String::from(HEADER);
    out.push('\n');
    for (name, (node, sub)) in listing {
        let mut e = Entry {
            n: name.clone(),
            k: String::new(),
            h: None,
            s: None,
            m: None,
            t: None,
        };
        match node {
            Node::File { hash, size, mode } => {
                e.k = "f".into();
                e.h = Some(hash.clone());
                e.s = Some(*size);
                e.m = Some(*mode);
            }
            Node::Link { target } => {
                e.k = "l".into();
                e.t = Some(target.clone());
            }
            Node::Dir { mode } => {
                e.k = "d".into();
                e.h = sub.clone();
                e.m = Some(*mode);
            }
            Node::Ignored { dir: false } => e.k = "i".into(),
            Node::Ignored { dir: true } => {
                e.k = "I".into();
                e.h = sub.clone();
            }
        }
        // A listing entry always serializes (strings and numbers only).
        out.push_str(&serde_json::to_string(&e).unwrap_or_default());
        out.push('\n');
    }
    out.into_bytes()
}

/// A listing read back from its bytes.
pub fn decode(bytes: &[u8]) -> io::Result<Listing> {
    let text = std::str::from_utf8(bytes).map_err(|_| bad("a listing is not UTF-8".into()))?;
    let mut lines = text.lines();
    if lines.next() != Some(HEADER) {
        return Err(bad("not a checkpoint listing".into()));
    }
    let mut out = Listing::new();
    for line in lines {
        let e: Entry = serde_json::from_str(line).map_err(|e| bad(format!("listing: {e}")))?;
        if e.n.is_empty() || e.n.contains('/') || e.n == "." || e.n == ".." {
            return Err(bad(format!("listing: bad name {:?}", e.n)));
        }
        let missing = |what: &str| bad(format!("listing: {} has no {what}", e.n));
        let (node, sub) = match e.k.as_str() {
            "f" => (
                Node::File {
                    hash: e.h.clone().ok_or_else(|| missing("hash"))?,
                    size: e.s.unwrap_or(0),
                    mode: e.m.unwrap_or(0o644),
                },
                None,
            ),
            "l" => (
                Node::Link {
                    target: e.t.clone().ok_or_else(|| missing("target"))?,
                },
                None,
            ),
            "d" => (
                Node::Dir {
                    mode: e.m.unwrap_or(0o755),
                },
                Some(e.h.clone().ok_or_else(|| missing("listing"))?),
            ),
            "i" => (Node::Ignored { dir: false }, None),
            "I" => (
                Node::Ignored { dir: true },
                Some(e.h.clone().ok_or_else(|| missing("listing"))?),
            ),
            other => return Err(bad(format!("listing: unknown kind {other:?}"))),
        };
        out.insert(e.n, (node, sub));
    }
    Ok(out)
}

/// The path `parent/name`.
pub fn join(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_string()
    } else {
        format!("{parent}/{name}")
    }
}

/// The parent of a path (`""` for a top-level one).
pub fn parent(path: &str) -> &str {
    path.rsplit_once('/').map(|(p, _)| p).unwrap_or("")
}

/// The listings of the last snapshot written, by directory, with their hashes: a directory
/// whose listing is the same again is not encoded, hashed or looked up again.
pub type Written = BTreeMap<String, (Listing, String)>;

/// Write the listings of `snap` to the store; returns the root listing's hash and the bytes
/// added. Every directory in `snap` gets a listing, and so does every parent of a path.
/// `prev` holds the listings of the snapshot written before (and is replaced by this one's).
pub fn write(store: &Store, snap: &Snapshot, prev: &mut Written) -> io::Result<(String, u64)> {
    write_tree(store, &by_dir(snap), prev)
}

/// [`write`] for a snapshot by directory. A directory whose entries and subdirectory
/// listings are those of its listing in `prev` is compared in place and its listing kept: no
/// listing is built, encoded or hashed for it.
pub fn write_tree(store: &Store, tree: &Tree, prev: &mut Written) -> io::Result<(String, u64)> {
    let mut hashes: HashMap<&str, String> = HashMap::with_capacity(tree.len());
    let mut added = 0;
    let mut now = Written::new();
    // Deepest first: a directory's listing needs its subdirectories' hashes.
    let mut order: Vec<&str> = tree.keys().map(String::as_str).collect();
    order.sort_by_key(|d| {
        std::cmp::Reverse(if d.is_empty() {
            0
        } else {
            d.matches('/').count() + 1
        })
    });
    let mut empty: Option<String> = None;
    for dir in order {
        let entries = &tree[dir];
        // The listing of each subdirectory (an empty one when the tree has none for it).
        let mut subs: HashMap<&str, String> = HashMap::new();
        for (name, node) in entries {
            if node.is_dir() {
                let hash = match hashes.get(join(dir, name).as_str()) {
                    Some(h) => h.clone(),
                    None => match &empty {
                        Some(h) => h.clone(),
                        None => {
                            let bytes = encode(&Listing::new());
                            let h = sha256_hex(&bytes);
                            added += store.put(&h, &bytes)?;
                            empty = Some(h.clone());
                            h
                        }
                    },
                };
                subs.insert(name.as_str(), hash);
            }
        }
        let same = prev.get(dir).is_some_and(|(old, _)| {
            old.len() == entries.len()
                && old
                    .iter()
                    .zip(entries)
                    .all(|((on, (onode, osub)), (n, node))| {
                        on == n
                            && onode == node
                            && osub.as_deref() == subs.get(n.as_str()).map(|s| s.as_str())
                    })
        });
        let (listing, hash) = match prev.remove(dir) {
            Some(kept) if same => kept,
            _ => {
                let listing: Listing = entries
                    .iter()
                    .map(|(n, node)| (n.clone(), (node.clone(), subs.remove(n.as_str()))))
                    .collect();
                let bytes = encode(&listing);
                let hash = sha256_hex(&bytes);
                added += store.put(&hash, &bytes)?;
                (listing, hash)
            }
        };
        hashes.insert(dir, hash.clone());
        now.insert(dir.to_string(), (listing, hash));
    }
    *prev = now;
    Ok((hashes.remove("").unwrap_or_default(), added))
}

/// Read listings from the store, each at most once.
pub struct Reader<'a> {
    store: &'a Store,
    cache: BTreeMap<String, Listing>,
}

impl<'a> Reader<'a> {
    pub fn new(store: &'a Store) -> Reader<'a> {
        Reader {
            store,
            cache: BTreeMap::new(),
        }
    }

    /// The listing `hash`.
    pub fn listing(&mut self, hash: &str) -> io::Result<Listing> {
        if let Some(l) = self.cache.get(hash) {
            return Ok(l.clone());
        }
        let l = decode(&self.store.get(hash)?)?;
        self.cache.insert(hash.to_string(), l.clone());
        Ok(l)
    }

    /// Every path under the listing `root` (whose own path is `at`), added to `out`.
    pub fn flatten(&mut self, root: &str, at: &str, out: &mut Snapshot) -> io::Result<()> {
        for (name, (node, sub)) in self.listing(root)? {
            let path = join(at, &name);
            if let Some(sub) = &sub {
                self.flatten(sub, &path, out)?;
            }
            out.insert(path, node);
        }
        Ok(())
    }

    /// The whole snapshot under `root`.
    pub fn snapshot(&mut self, root: &str) -> io::Result<Snapshot> {
        let mut out = Snapshot::new();
        self.flatten(root, "", &mut out)?;
        Ok(out)
    }

    /// The node at `path` under `root`, reading only the listings on the way.
    pub fn node_at(&mut self, root: &str, path: &str) -> io::Result<Option<Node>> {
        let mut listing = root.to_string();
        let parts: Vec<&str> = path.split('/').collect();
        for (i, part) in parts.iter().enumerate() {
            let l = self.listing(&listing)?;
            let Some((node, sub)) = l.get(*part) else {
                return Ok(None);
            };
            if i + 1 == parts.len() {
                return Ok(Some(node.clone()));
            }
            match sub {
                Some(s) => listing = s.clone(),
                None => return Ok(None),
            }
        }
        Ok(None)
    }

    /// The paths that differ between the listings `a` and `b` (both at `at`), with their node
    /// on each side; a directory present on one side only brings every path beneath it.
    /// Directories whose listings are identical are not read.
    pub fn diff(&mut self, a: &str, b: &str, at: &str, out: &mut Changes) -> io::Result<()> {
        if a == b {
            return Ok(());
        }
        let la = self.listing(a)?;
        let lb = self.listing(b)?;
        let names: BTreeSet<&String> = la.keys().chain(lb.keys()).collect();
        for name in names {
            let path = join(at, name);
            let ea = la.get(name);
            let eb = lb.get(name);
            match (ea, eb) {
                (Some((na, sa)), Some((nb, sb))) => {
                    match (sa, sb) {
                        (Some(sa), Some(sb)) => {
                            if na != nb {
                                out.insert(path.clone(), (Some(na.clone()), Some(nb.clone())));
                            }
                            self.diff(sa, sb, &path, out)?;
                        }
                        _ => {
                            if na != nb {
                                out.insert(path.clone(), (Some(na.clone()), Some(nb.clone())));
                            }
                            // One side a directory: its paths appear or go.
                            if let Some(sa) = sa {
                                let mut sub = Snapshot::new();
                                self.flatten(sa, &path, &mut sub)?;
                                for (p, n) in sub {
                                    out.insert(p, (Some(n), None));
                                }
                            }
                            if let Some(sb) = sb {
                                let mut sub = Snapshot::new();
                                self.flatten(sb, &path, &mut sub)?;
                                for (p, n) in sub {
                                    out.insert(p, (None, Some(n)));
                                }
                            }
                        }
                    }
                }
                (Some((na, sa)), None) => {
                    out.insert(path.clone(), (Some(na.clone()), None));
                    if let Some(sa) = sa {
                        let mut sub = Snapshot::new();
                        self.flatten(sa, &path, &mut sub)?;
                        for (p, n) in sub {
                            out.insert(p, (Some(n), None));
                        }
                    }
                }
                (None, Some((nb, sb))) => {
                    out.insert(path.clone(), (None, Some(nb.clone())));
                    if let Some(sb) = sb {
                        let mut sub = Snapshot::new();
                        self.flatten(sb, &path, &mut sub)?;
                        for (p, n) in sub {
                            out.insert(p, (None, Some(n)));
                        }
                    }
                }
                (None, None) => {}
            }
        }
        Ok(())
    }
}

/// A new root listing: `root` with the node at `path` set to `node` (a file or a link; its
/// parent directory must be in the tree). Only the listings on the way to it are rewritten.
pub fn replace(store: &Store, root: &str, path: &str, node: Node) -> io::Result<String> {
    let mut reader = Reader::new(store);
    let parts: Vec<&str> = path.split('/').collect();
    // The listings from the root down to the path's parent.
    let mut chain: Vec<Listing> = Vec::new();
    let mut at = root.to_string();
    for (i, part) in parts.iter().enumerate() {
        let l = reader.listing(&at)?;
        if i + 1 < parts.len() {
            let sub = l
                .get(*part)
                .and_then(|(_, s)| s.clone())
                .ok_or_else(|| bad(format!("{path}: its directory is not in the checkpoint")))?;
            at = sub;
        }
        chain.push(l);
    }
    let mut entry: (Node, Option<String>) = (node, None);
    let mut hash = String::new();
    for depth in (0..chain.len()).rev() {
        let mut l = chain[depth].clone();
        l.insert(parts[depth].to_string(), entry);
        let bytes = encode(&l);
        hash = sha256_hex(&bytes);
        store.put(&hash, &bytes)?;
        if depth == 0 {
            break;
        }
        // The directory keeps its own node (mode, excluded or not) in its parent.
        let own = chain[depth - 1]
            .get(parts[depth - 1])
            .map(|(n, _)| n.clone())
            .unwrap_or(Node::Dir { mode: 0o755 });
        entry = (own, Some(hash.clone()));
    }
    Ok(hash)
}

/// Changed paths: path → (node before, node after).
pub type Changes = BTreeMap<String, (Option<Node>, Option<Node>)>;

#[cfg(test)]
mod tests {
    use super::*;

    fn file(h: &str) -> Node {
        Node::File {
            hash: sha256_hex(h.as_bytes()),
            size: h.len() as u64,
            mode: 0o644,
        }
    }

    #[test]
    fn listings_round_trip_and_diffs_skip_shared_directories() {
        let dir = crate::scratch::path("tree");
        let _ = std::fs::remove_dir_all(&dir);
        let store = Store::new(&dir);
        let mut a = Snapshot::new();
        a.insert("src".into(), Node::Dir { mode: 0o755 });
        a.insert("src/a.rs".into(), file("a"));
        a.insert("src/deep".into(), Node::Dir { mode: 0o700 });
        a.insert("src/deep/x".into(), file("x"));
        a.insert(
            "link".into(),
            Node::Link {
                target: "src/a.rs".into(),
            },
        );
        a.insert("build".into(), Node::Ignored { dir: true });
        a.insert("build/out".into(), Node::Ignored { dir: false });
        a.insert("name with \"quotes\"\n".into(), file("q"));
        let (ra, _) = write(&store, &a, &mut Written::new()).unwrap();
        let mut r = Reader::new(&store);
        assert_eq!(r.snapshot(&ra).unwrap(), a);
        assert_eq!(r.node_at(&ra, "src/deep/x").unwrap(), Some(file("x")));
        assert_eq!(r.node_at(&ra, "src/nope").unwrap(), None);

        let mut b = a.clone();
        b.insert("src/a.rs".into(), file("a2"));
        b.remove("src/deep/x");
        b.remove("src/deep");
        b.insert("new".into(), Node::Dir { mode: 0o755 });
        b.insert("new/n".into(), file("n"));
        let mut prev = Written::new();
        write(&store, &a, &mut prev).unwrap();
        let (rb, added) = write(&store, &b, &mut prev).unwrap();
        // The unchanged listing of src/deep's sibling `build` is not written again.
        assert!(added > 0);
        assert_eq!(write(&store, &b, &mut prev).unwrap(), (rb.clone(), 0));
        let mut changes = Changes::new();
        r.diff(&ra, &rb, "", &mut changes).unwrap();
        let paths: Vec<&str> = changes.keys().map(String::as_str).collect();
        assert_eq!(
            paths,
            ["new", "new/n", "src/a.rs", "src/deep", "src/deep/x"]
        );
        assert_eq!(changes["src/deep/x"], (Some(file("x")), None));
        assert_eq!(changes["new/n"], (None, Some(file("n"))));
        let rc = replace(&store, &rb, "build/out", file("captured")).unwrap();
        assert_eq!(r.node_at(&rc, "build/out").unwrap(), Some(file("captured")));
        assert_eq!(
            r.node_at(&rc, "build").unwrap(),
            Some(Node::Ignored { dir: true })
        );
        assert_eq!(r.node_at(&rc, "src/a.rs").unwrap(), Some(file("a2")));
        assert!(replace(&store, &rb, "nodir/x", file("x")).is_err());
        assert!(decode(b"not a tree\n").is_err());
        assert!(decode(b"openmax-tree 1\n{\"n\":\"../x\",\"k\":\"i\"}\n").is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
