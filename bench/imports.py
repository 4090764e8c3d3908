#!/usr/bin/env python3
"""The import graph of a crate's modules: which file names which (by `use crate::…`, `super::…`
and inline `crate::…` paths), its import circles (files that reach themselves), and the rooms
(top-level modules) with their floors and arrows.

    bench/imports.py [shell/src]      # figures, then each circle and each upward arrow

A room's floor is one more than the highest floor among the rooms it imports (a room importing
nothing is on floor 1); an arrow is one room importing another; an arrow runs back up when it
points to a room on the same or a higher floor (only possible inside a circle of rooms).
Test modules (`*_tests.rs`, `tests.rs`, `#[cfg(test)] mod tests { … }` bodies) are left out.
"""
import os
import re
import sys
from collections import defaultdict

root = sys.argv[1] if len(sys.argv) > 1 else "shell/src"


def module_of(path):
    rel = os.path.relpath(path, root)[:-3]
    parts = rel.split(os.sep)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return tuple(parts)


files = {}
for d, _, names in os.walk(root):
    for n in names:
        if n.endswith(".rs") and not n.endswith("_tests.rs") and n != "tests.rs":
            p = os.path.join(d, n)
            files[module_of(p)] = p

test_mod = re.compile(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{")


def strip_tests(text):
    out, i = [], 0
    for m in test_mod.finditer(text):
        if m.start() < i:
            continue
        out.append(text[i:m.start()])
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)


def strip_comments(text):
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r"/\*.*?\*/", "", text, flags=re.S)


def resolve(base, path):
    """The longest known module prefix of `base + path`."""
    parts = list(base) + [p for p in path if p]
    while parts:
        if tuple(parts) in files:
            return tuple(parts)
        parts.pop()
    return None


def expand_use(tree):
    """`a::{b, c::d}` to [a::b, a::c::d] (nested braces)."""
    tree = tree.replace(" ", "").replace("\n", "")
    m = re.match(r"^(.*?)\{(.*)\}$", tree)
    if not m:
        return [tree]
    prefix, inner = m.group(1), m.group(2)
    items, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
            continue
        depth += {"{": 1, "}": -1}.get(ch, 0)
        cur += ch
    items.append(cur)
    out = []
    for it in items:
        if it:
            out += expand_use(prefix + it)
    return out


edges = defaultdict(set)
for mod, path in files.items():
    text = strip_comments(strip_tests(open(path, encoding="utf-8").read()))
    # The module a `super::` in this file starts from: mod.rs is its own directory's module.
    here = mod
    paths = []
    for m in re.finditer(r"\buse\s+([^;]+);", text):
        paths += expand_use(m.group(1))
    paths += re.findall(r"\b((?:crate|super)(?:::\w+)+)", text)
    for p in paths:
        segs = p.split("::")
        if segs[0] == "crate":
            target = resolve((), segs[1:])
        elif segs[0] == "super":
            base = list(here)
            while segs and segs[0] == "super":
                base = base[:-1]
                segs = segs[1:]
            target = resolve(tuple(base), segs)
        elif segs[0] == "self":
            target = resolve(here, segs[1:])
        else:
            continue
        if target and target != mod and target != ():
            edges[mod].add(target)


def sccs(nodes, adj):
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in adj.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(comp)

    sys.setrecursionlimit(10000)
    for v in nodes:
        if v not in index:
            visit(v)
    return out


# Edges to a module's own ancestors (a file naming its parent's re-exports) are part of the
# tree, not arrows: a child reaching `super::X` where X is defined in the parent file is kept,
# as it is a real dependency.
circles = [c for c in sccs(list(files), edges) if len(c) > 1]

room = lambda m: m[0] if m else "lib"
room_edges = defaultdict(set)
for a, bs in edges.items():
    for b in bs:
        if room(a) != room(b):
            room_edges[room(a)].add(room(b))
rooms = sorted({room(m) for m in files})
room_sccs = sccs(rooms, room_edges)
comp_of = {r: i for i, c in enumerate(room_sccs) for r in c}
floor = {}
for c in room_sccs:  # Tarjan yields components in reverse topological order
    f = 1
    for r in c:
        for t in room_edges.get(r, ()):
            if comp_of[t] != comp_of[r]:
                f = max(f, floor[t] + 1)
    for r in c:
        floor[r] = f
arrows = [(a, b) for a in rooms for b in sorted(room_edges.get(a, ()))]
up = [(a, b) for a, b in arrows if floor[b] >= floor[a]]
lines = sum(sum(1 for _ in open(p, encoding="utf-8")) for p in files.values())

print(f"{root}: {len(files)} files, {lines} lines, {len(rooms)} rooms on "
      f"{max(floor.values())} floors, {len(arrows)} arrows ({len(up)} running back up), "
      f"{len(circles)} import circles")
for f in sorted(set(floor.values())):
    print(f"  floor {f}: {' '.join(r for r in rooms if floor[r] == f)}")
for c in circles:
    print("  circle: " + " ↔ ".join("/".join(m) for m in sorted(c)))
for a, b in up:
    print(f"  up: {a} → {b}")
