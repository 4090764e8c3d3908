//! The one-walk scan against the scan it replaced, kept here as the reference: the ignore
//! walker yielding what is recorded, each path `lstat`ed whole, and a second pass reading every
//! recorded directory again for the excluded names. On a tree with nested `.gitignore` and
//! `.ignore` files, negations, hidden files, links, an unreadable directory and `.git`, both
//! record the same paths and leave out the same ones, with and without the cap on excluded
//! names; and the stat cache answers a file whose stat matches.

use std::collections::{BTreeSet, HashSet};
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::cache::{Cache, Stat};
use super::manifest::Left;
use super::scan::{rel_of, scan};
use super::store::Store;
use super::tree::{flat, join, Node, Snapshot};
use super::Caps;

/// What the reference scan records: every path, what it left out, the excluded names listed.
struct Reference {
    snap: Snapshot,
    left: Vec<Left>,
    ignored: u64,
}

/// The scan as it was: two walks, whole paths, every file read.
fn reference(project: &Path, store: &Store, caps: &Caps, extra: &BTreeSet<String>) -> Reference {
    let mut out = Reference {
        snap: Snapshot::new(),
        left: Vec::new(),
        ignored: 0,
    };
    let mut seen: HashSet<String> = HashSet::new();
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
        seen.insert(rel.to_string());
        record(project, rel, store, &mut out);
    }
    let mut dirs: Vec<String> = vec![String::new()];
    dirs.extend(
        out.snap
            .iter()
            .filter(|(_, n)| matches!(n, Node::Dir { .. }))
            .map(|(p, _)| p.clone()),
    );
    let mut pending: Vec<String> = Vec::new();
    'list: {
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
                if !excluded(&rel, &e, caps, &mut out, &mut pending) {
                    break 'list;
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
                if !excluded(&join(&d, &name), &e, caps, &mut out, &mut pending) {
                    break 'list;
                }
            }
        }
    }
    for p in extra {
        let parent = super::tree::parent(p);
        let placed = parent.is_empty() || out.snap.contains_key(parent);
        if placed && matches!(out.snap.get(p), Some(Node::Ignored { dir: false }) | None) {
            out.snap.remove(p);
            record(project, p, store, &mut out);
        }
    }
    out
}

fn excluded(
    rel: &str,
    e: &fs::DirEntry,
    caps: &Caps,
    out: &mut Reference,
    pending: &mut Vec<String>,
) -> bool {
    if out.ignored >= caps.max_ignored {
        out.left.push(Left::new(rel, "past the cap".into()));
        return false;
    }
    let dir = e.file_type().is_ok_and(|t| t.is_dir());
    out.snap.insert(rel.to_string(), Node::Ignored { dir });
    out.ignored += 1;
    if dir {
        pending.push(rel.to_string());
    }
    true
}

fn record(project: &Path, rel: &str, store: &Store, out: &mut Reference) {
    let path = project.join(rel);
    let meta = match fs::symlink_metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
        Err(e) => return out.left.push(Left::new(rel, format!("not read: {e}"))),
    };
    let ft = meta.file_type();
    let node = if ft.is_dir() {
        Node::Dir {
            mode: meta.mode() & 0o7777,
        }
    } else if ft.is_symlink() {
        let target = fs::read_link(&path).unwrap();
        Node::Link {
            target: target.to_str().unwrap().to_string(),
        }
    } else if ft.is_file() {
        match store.put_file(&path, &mut |_| Ok(())) {
            Ok(Ok((hash, size, _))) => Node::File {
                hash,
                size,
                mode: meta.mode() & 0o7777,
            },
            _ => return out.left.push(Left::new(rel, "not recorded".into())),
        }
    } else {
        return out.left.push(Left::new(rel, "other".into()));
    };
    out.snap.insert(rel.to_string(), node);
}

struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let locked = self.0.join("project/locked");
        let _ = fs::set_permissions(locked, fs::Permissions::from_mode(0o755));
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn put(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

/// A project with ignore files at several depths, and what they exclude.
fn project(name: &str) -> (Dir, PathBuf, Store) {
    let base = crate::scratch::path(&format!("scan-{name}"));
    let _ = fs::remove_dir_all(&base);
    let root = base.join("project");
    put(
        &root,
        ".gitignore",
        "target/\n*.log\n!keep.log\n/top-only\n",
    );
    put(&root, "src/.gitignore", "gen/\n*.tmp\n");
    put(&root, "src/deep/.ignore", "!x.tmp\nsecret*\n");
    put(&root, "src/deep/nested/.gitignore", "*\n!*.rs\n!sub/\n");
    for f in [
        "a.txt",
        "keep.log",
        "drop.log",
        "top-only",
        ".hidden",
        "src/top-only",
        "src/a.rs",
        "src/b.tmp",
        "src/gen/out.rs",
        "src/gen/inner/more.rs",
        "src/deep/x.tmp",
        "src/deep/y.tmp",
        "src/deep/secret.key",
        "src/deep/ok.rs",
        "src/deep/nested/a.rs",
        "src/deep/nested/b.txt",
        "src/deep/nested/sub/c.rs",
        "src/deep/nested/sub/d.md",
        "target/debug/app",
        "target/debug/deps/x.o",
        "locked/inside",
        ".git/HEAD",
        "src/.git",
    ] {
        put(&root, f, f);
    }
    fs::create_dir_all(root.join("empty/dir")).unwrap();
    fs::create_dir_all(root.join("target/.git")).unwrap();
    std::os::unix::fs::symlink("a.txt", root.join("link")).unwrap();
    std::os::unix::fs::symlink("../nowhere", root.join("src/dangling.log")).unwrap();
    fs::set_permissions(root.join("locked"), fs::Permissions::from_mode(0o311)).unwrap();
    let root = fs::canonicalize(&root).unwrap();
    (Dir(base.clone()), root, Store::new(&base.join("home")))
}

fn sorted(mut left: Vec<Left>) -> Vec<String> {
    left.sort_by(|a, b| a.path.cmp(&b.path));
    left.into_iter().map(|l| l.path).collect()
}

#[test]
fn one_walk_records_and_lists_what_the_two_walks_did() {
    let (_d, root, store) = project("same");
    let extra: BTreeSet<String> = ["drop.log", "src/gen/out.rs", "target/debug/deps/x.o"]
        .into_iter()
        .map(String::from)
        .collect();
    for caps in [
        Caps::default(),
        Caps {
            max_ignored: 5,
            ..Caps::default()
        },
    ] {
        for extra in [BTreeSet::new(), extra.clone()] {
            let want = reference(&root, &store, &caps, &extra);
            let got = scan(&root, &store, Cache::new(), &caps, &extra, 0);
            assert_eq!(flat(&got.tree), want.snap, "cap {}", caps.max_ignored);
            assert_eq!(got.ignored, want.ignored);
            assert_eq!(sorted(got.left), sorted(want.left));
            for (dir, nodes) in &got.tree {
                for (name, node) in nodes {
                    if node.is_dir() {
                        assert!(got.tree.contains_key(&join(dir, name)), "{dir}/{name}");
                    }
                }
            }
        }
    }
    let got = scan(&root, &store, Cache::new(), &Caps::default(), &extra, 0);
    let node = |p: &str| got.node(p).cloned();
    assert!(matches!(node("src/deep/x.tmp"), Some(Node::File { .. })));
    assert!(matches!(
        node("src/deep/nested/sub/c.rs"),
        Some(Node::File { .. })
    ));
    assert!(matches!(node("src/gen/out.rs"), Some(Node::File { .. })));
    assert_eq!(node("src/gen/inner"), Some(Node::Ignored { dir: true }));
    assert_eq!(
        node("src/deep/secret.key"),
        Some(Node::Ignored { dir: false })
    );
    assert_eq!(
        node("src/deep/nested/sub/d.md"),
        Some(Node::Ignored { dir: false })
    );
    assert_eq!(node("target/.git"), Some(Node::Ignored { dir: true }));
    assert_eq!(node(".git"), None);
    assert_eq!(node("src/.git"), None);
    assert!(matches!(node("locked"), Some(Node::Dir { mode: 0o311 })));
    assert!(matches!(
        node("src/dangling.log"),
        Some(Node::Ignored { dir: false })
    ));
}

#[test]
fn a_file_whose_stat_matches_the_cache_is_not_read() {
    let (_d, root, store) = project("cache");
    let caps = Caps::default();
    let none = BTreeSet::new();
    let stat = |rel: &str| Stat::of(&fs::symlink_metadata(root.join(rel)).unwrap());
    let mut old = Cache::new();
    let fake = "f".repeat(64);
    old.insert("src/a.rs", stat("src/a.rs"), fake.clone());
    let mut moved = stat("a.txt");
    moved.ino += 1;
    old.insert("a.txt", moved, fake.clone());
    let got = scan(&root, &store, old, &caps, &none, 0);
    let hash = |p: &str| match got.node(p) {
        Some(Node::File { hash, .. }) => hash.clone(),
        other => panic!("{p}: {other:?}"),
    };
    assert_eq!(hash("src/a.rs"), fake);
    assert_eq!(hash("a.txt"), crate::digest::sha256_hex(b"a.txt"));
}
