//! The shell's import graph: which file names which (`use crate::…`, `use super::…`, and
//! `crate::…`/`super::…` paths written inline), read from the sources as written.
//!
//! - No file reaches itself through its uses (no import circle): a module that needs what
//!   another needs of it shares a third, smaller module instead.
//! - `cargo test -p openmax-shell --test import_graph -- --nocapture` prints the figures: the
//!   files, the rooms (top-level modules), the floors they stand on (a room is one floor above
//!   the highest room it imports; rooms that import each other share a floor) and the arrows
//!   between rooms, with those that run back up.
//!
//! Test code (`*_tests.rs`, `tests.rs`, `#[cfg(test)] mod … { … }`) is left out: a test may
//! reach anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Module = Vec<String>;

/// Every non-test source file of the crate, by module path (`mod.rs` is its directory's).
fn files(root: &Path) -> BTreeMap<Module, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d)
            .expect("read the source tree")
            .flatten()
        {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if !name.ends_with(".rs") || name.ends_with("_tests.rs") || name == "tests.rs" {
                continue;
            }
            let rel = p.strip_prefix(root).unwrap().with_extension("");
            let mut m: Module = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(m.last().map(String::as_str), Some("mod" | "lib" | "main")) {
                m.pop();
            }
            out.insert(m, p);
        }
    }
    out
}

/// `text` without comments, string literals' contents and `#[cfg(test)] mod x { … }` bodies.
fn code_of(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            i += 2;
            while i < b.len() && !b[i..].starts_with(b"*/") {
                i += 1;
            }
            i += 2;
        } else if b[i] == b'r' && (b[i..].starts_with(b"r\"") || b[i..].starts_with(b"r#")) {
            // A raw string: r"…", r#"…"#, …
            let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
            if b.get(i + 1 + hashes) != Some(&b'"') {
                out.push('r');
                i += 1;
                continue;
            }
            let end: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            i += 2 + hashes;
            while i < b.len() && !b[i..].starts_with(&end) {
                i += 1;
            }
            i += end.len();
            out.push_str("\"\"");
        } else if b[i] == b'\'' && (b.get(i + 2) == Some(&b'\'') || b.get(i + 1) == Some(&b'\\')) {
            // A char literal ('"', '\'', '\n', '\u{…}'); a lifetime has no closing quote.
            i += 1;
            while i < b.len() && b[i] != b'\'' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("' '");
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if b[i..].starts_with(b"#[cfg(test)]") {
            // Skip the attribute; if a `mod name {` follows, skip its body.
            i += "#[cfg(test)]".len();
            let rest = &text[i..];
            let trimmed = rest.trim_start();
            let words: Vec<&str> = trimmed.splitn(4, char::is_whitespace).collect();
            let is_mod = words.first() == Some(&"mod")
                || (words.first().is_some_and(|w| w.starts_with("pub"))
                    && words.get(1) == Some(&"mod"));
            if is_mod {
                if let Some(open) = rest.find(['{', ';']) {
                    i += open;
                    if b[i] == b'{' {
                        let mut depth = 0;
                        while i < b.len() {
                            match b[i] {
                                b'{' => depth += 1,
                                b'}' => {
                                    depth -= 1;
                                    if depth == 0 {
                                        i += 1;
                                        break;
                                    }
                                }
                                _ => {}
                            }
                            i += 1;
                        }
                    }
                }
            }
        } else {
            let ch = text[i..].chars().next().unwrap();
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// `a::{b, c::{d, e}}` as `[a::b, a::c::d, a::c::e]`.
fn expand(tree: &str) -> Vec<String> {
    let tree: String = tree.chars().filter(|c| !c.is_whitespace()).collect();
    let Some(open) = tree.find('{') else {
        return vec![tree];
    };
    let (prefix, inner) = (&tree[..open], &tree[open + 1..tree.len() - 1]);
    let mut items = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (k, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&inner[start..k]);
                start = k + 1;
            }
            _ => {}
        }
    }
    items.push(&inner[start..]);
    items
        .into_iter()
        .filter(|i| !i.is_empty())
        .flat_map(|i| expand(&format!("{prefix}{i}")))
        .collect()
}

/// Every `crate::…`, `super::…` and `self::…` path in `code`: its `use` trees expanded, and
/// paths written inline.
fn paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    // The `use` trees, and the code without them for the inline paths.
    let mut rest = String::with_capacity(code.len());
    let mut from = 0;
    while let Some(k) = code[from..].find("use ") {
        let at = from + k;
        let before = code[..at].chars().last();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            rest.push_str(&code[from..at + 4]);
            from = at + 4;
            continue;
        }
        let Some(end) = code[at..].find(';') else {
            break;
        };
        out.extend(expand(&code[at + 4..at + end]));
        rest.push_str(&code[from..at]);
        from = at + end + 1;
    }
    rest.push_str(&code[from..]);
    let code = rest.as_str();
    let b = code.as_bytes();
    for start in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(k) = code[from..].find(start) {
            let at = from + k;
            from = at + start.len();
            if at > 0 && (b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_') {
                continue;
            }
            let end = code[at..]
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .map_or(code.len(), |e| at + e);
            out.push(code[at..end].trim_end_matches(':').to_string());
        }
    }
    out
}

/// The file `path` (as written in `here`) names: the longest known module prefix.
fn target(files: &BTreeMap<Module, PathBuf>, here: &Module, path: &str) -> Option<Module> {
    let mut segs = path.split("::").filter(|s| !s.is_empty()).peekable();
    let mut base: Module = match segs.peek().copied() {
        Some("crate") => {
            segs.next();
            Vec::new()
        }
        Some("super") => {
            let mut b = here.clone();
            while segs.peek() == Some(&"super") {
                segs.next();
                b.pop();
            }
            b
        }
        Some("self") => {
            segs.next();
            here.clone()
        }
        _ => return None,
    };
    base.extend(segs.map(str::to_string));
    while !base.is_empty() {
        if files.contains_key(&base) {
            return Some(base);
        }
        base.pop();
    }
    None
}

/// The import graph: each file's targets (itself and the crate root left out).
fn graph(files: &BTreeMap<Module, PathBuf>) -> BTreeMap<Module, BTreeSet<Module>> {
    let mut edges = BTreeMap::new();
    for (m, p) in files {
        let code = code_of(&std::fs::read_to_string(p).expect("read a source file"));
        let to: BTreeSet<Module> = paths(&code)
            .iter()
            .filter_map(|path| target(files, m, path))
            .filter(|t| t != m && !t.is_empty())
            .collect();
        edges.insert(m.clone(), to);
    }
    edges
}

/// The strongly connected components of `edges` (Tarjan), in reverse topological order.
fn components<N: Ord + Clone>(nodes: &[N], edges: &BTreeMap<N, BTreeSet<N>>) -> Vec<Vec<N>> {
    struct T<'a, N: Ord> {
        edges: &'a BTreeMap<N, BTreeSet<N>>,
        index: BTreeMap<N, usize>,
        low: BTreeMap<N, usize>,
        stack: Vec<N>,
        on: BTreeSet<N>,
        out: Vec<Vec<N>>,
    }
    fn visit<N: Ord + Clone>(t: &mut T<'_, N>, v: &N) {
        let n = t.index.len();
        t.index.insert(v.clone(), n);
        t.low.insert(v.clone(), n);
        t.stack.push(v.clone());
        t.on.insert(v.clone());
        let next: Vec<N> = t.edges.get(v).into_iter().flatten().cloned().collect();
        for w in &next {
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            loop {
                let w = t.stack.pop().unwrap();
                t.on.remove(&w);
                let done = &w == v;
                comp.push(w);
                if done {
                    break;
                }
            }
            t.out.push(comp);
        }
    }
    let mut t = T {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in nodes {
        if !t.index.contains_key(v) {
            visit(&mut t, v);
        }
    }
    t.out
}

fn name(m: &Module) -> String {
    m.join("/")
}

#[test]
fn no_file_of_the_shell_reaches_itself_through_its_uses() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = files(&root);
    let edges = graph(&files);
    let nodes: Vec<Module> = files.keys().cloned().collect();
    let circles: Vec<Vec<Module>> = components(&nodes, &edges)
        .into_iter()
        .filter(|c| c.len() > 1)
        .collect();

    // Rooms, floors and arrows, for the figures.
    let room = |m: &Module| m.first().cloned().unwrap_or_else(|| "lib".into());
    let mut room_edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (a, to) in &edges {
        room_edges.entry(room(a)).or_default();
        for b in to {
            if room(a) != room(b) {
                room_edges.entry(room(a)).or_default().insert(room(b));
            }
        }
    }
    let rooms: Vec<String> = room_edges.keys().cloned().collect();
    let mut floor: BTreeMap<String, usize> = BTreeMap::new();
    for comp in components(&rooms, &room_edges) {
        let f = comp
            .iter()
            .flat_map(|r| &room_edges[r])
            .filter(|t| !comp.contains(t))
            .map(|t| floor[t] + 1)
            .max()
            .unwrap_or(1);
        for r in comp {
            floor.insert(r, f);
        }
    }
    let arrows: Vec<(&String, &String)> = room_edges
        .iter()
        .flat_map(|(a, to)| to.iter().map(move |b| (a, b)))
        .collect();
    let up: Vec<&(&String, &String)> = arrows
        .iter()
        .filter(|(a, b)| floor[*b] >= floor[*a])
        .collect();
    let lines: usize = files
        .values()
        .map(|p| std::fs::read_to_string(p).unwrap().lines().count())
        .sum();
    println!(
        "shell/src: {} files, {lines} lines; {} rooms on {} floors, {} arrows ({} running back \
         up); {} import circles",
        files.len(),
        rooms.len(),
        floor.values().max().unwrap_or(&0),
        arrows.len(),
        up.len(),
        circles.len()
    );
    for f in 1..=*floor.values().max().unwrap_or(&0) {
        let on: Vec<&str> = rooms
            .iter()
            .filter(|r| floor[*r] == f)
            .map(String::as_str)
            .collect();
        println!("  floor {f}: {}", on.join(" "));
    }
    for (a, b) in &up {
        println!("  back up: {a} → {b}");
    }
    let shown: Vec<String> = circles
        .iter()
        .map(|c| {
            let mut names: Vec<String> = c.iter().map(name).collect();
            names.sort();
            names.join(" ↔ ")
        })
        .collect();
    assert!(
        circles.is_empty(),
        "files that reach themselves through their uses (move what both need into a smaller \
         module they share):\n  {}",
        shown.join("\n  ")
    );
}

#[test]
fn the_reader_sees_uses_paths_and_leaves_tests_and_comments_out() {
    let code = code_of(
        "use crate::a::{b, c::{d, e}};\n// use crate::gone;\nfn f() { super::x::y(); \
         let s = \"crate::in_string\"; }\n#[cfg(test)]\nmod tests { use crate::test_only; }\n",
    );
    let mut p = paths(&code);
    p.sort();
    assert_eq!(
        p,
        [
            "crate::a::b",
            "crate::a::c::d",
            "crate::a::c::e",
            "super::x::y"
        ]
    );
    let mut files = BTreeMap::new();
    for m in [vec!["a"], vec!["a", "c"], vec!["x"]] {
        files.insert(m.iter().map(|s| s.to_string()).collect(), PathBuf::new());
    }
    let here: Module = vec!["a".into(), "c".into()];
    assert_eq!(
        target(&files, &here, "super::super::x::y"),
        Some(vec!["x".to_string()])
    );
    assert_eq!(target(&files, &here, "crate::a::c::d"), Some(here.clone()));
    assert_eq!(
        target(&files, &here, "crate::a::b"),
        Some(vec!["a".to_string()])
    );
    // A circle is found; a chain is not.
    let e = |pairs: &[(&str, &str)]| {
        let mut m: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (a, b) in pairs {
            m.entry(a.to_string()).or_default().insert(b.to_string());
        }
        m
    };
    let n: Vec<String> = ["p", "q", "r"].iter().map(|s| s.to_string()).collect();
    let circle = e(&[("p", "q"), ("q", "r"), ("r", "p")]);
    assert!(components(&n, &circle).iter().any(|c| c.len() == 3));
    let chain = e(&[("p", "q"), ("q", "r")]);
    assert!(components(&n, &chain).iter().all(|c| c.len() == 1));
}

/// The rooms a room's files import (other rooms only).
fn imports_of(edges: &BTreeMap<Module, BTreeSet<Module>>, from: &str) -> BTreeSet<String> {
    let room = |m: &Module| m.first().cloned().unwrap_or_else(|| "lib".into());
    edges
        .iter()
        .filter(|(a, _)| room(a) == from)
        .flat_map(|(_, to)| to.iter().map(room))
        .filter(|r| r != from)
        .collect()
}

#[test]
fn the_frontends_stand_above_the_runtime_and_nothing_imports_the_dispatcher() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = files(&root);
    let edges = graph(&files);
    let rooms: BTreeSet<String> = files
        .keys()
        .map(|m| m.first().cloned().unwrap_or_else(|| "lib".into()))
        .collect();
    for r in &rooms {
        let to = imports_of(&edges, r);
        // `app` is the dispatcher: only the binary's `main` (and `lib`, which declares it)
        // reaches it.
        if !matches!(r.as_str(), "main" | "lib") {
            assert!(!to.contains("app"), "{r} imports the dispatcher app/");
        }
        // The frontends are reached only from the dispatcher: no room below uses one.
        if !matches!(r.as_str(), "app" | "main" | "lib") {
            assert!(!to.contains("frontend"), "{r} imports a frontend");
        }
    }
    // The frontends use the runtime and the start-up; neither uses them back.
    let front = imports_of(&edges, "frontend");
    assert!(
        front.contains("run") && front.contains("start"),
        "{front:?}"
    );
    // The check itself: a room that imports `app` is seen (the dispatcher does import
    // `frontend`, so the reader finds arrows into it).
    assert!(imports_of(&edges, "app").contains("frontend"));
}
