//! The core crate stays pure: its only dependencies are serde, serde_json, sha2, similar and the
//! bash grammar (tree-sitter, tree-sitter-bash: a parser, no I/O) that `shell` rules judge with,
//! and no source file under `core/src` names tokio, hyper, a random source, or std's fs, net,
//! process, time or env; this test fails if one appears. Unit-test code (`tests.rs` modules,
//! files under a `tests/` directory and everything after `#[cfg(test)]` in a file) is exempt:
//! it is not part of the built crate.

use std::path::{Path, PathBuf};

const ALLOWED_DEPS: [&str; 6] = [
    "serde",
    "serde_json",
    "sha2",
    "similar",
    "tree-sitter",
    "tree-sitter-bash",
];

/// Forbidden names in core sources, with why.
const FORBIDDEN: [(&str, &str); 12] = [
    ("std::fs", "file I/O"),
    ("std::net", "network I/O"),
    ("std::process", "processes"),
    ("std::time", "a clock"),
    ("std::env", "environment variables"),
    ("std::thread", "threads"),
    ("tokio", "an async runtime"),
    ("hyper", "HTTP"),
    ("Instant::now", "a clock"),
    ("SystemTime", "a clock"),
    ("thread_rng", "an unseeded random source"),
    ("getrandom", "an unseeded random source"),
];

fn core_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../core")
}

/// Dependency names in the `[dependencies]` table of a Cargo.toml text.
fn dependencies(toml: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in toml.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            inside = line == "[dependencies]";
            continue;
        }
        if inside && !line.is_empty() && !line.starts_with('#') {
            if let Some((name, _)) = line.split_once('=') {
                out.push(name.trim().trim_end_matches(".workspace").to_string());
            }
        }
    }
    out
}

/// Every forbidden use in one source text: (line number, name, why). `std::{fs, …}` groups
/// count too.
fn forbidden_uses(src: &str) -> Vec<(usize, &'static str, &'static str)> {
    let mut out = Vec::new();
    for (n, line) in src.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        for (name, why) in FORBIDDEN {
            if code.contains(name) {
                out.push((n + 1, name, why));
            }
        }
        if let Some(group) = code.split("std::{").nth(1) {
            for m in ["fs", "net", "process", "time", "env", "thread"] {
                if group
                    .split(|c: char| !c.is_alphanumeric() && c != '_')
                    .any(|w| w == m)
                {
                    out.push((n + 1, "std::{..}", "a forbidden std module in a use group"));
                }
            }
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("core/src is readable") {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn core_depends_only_on_pure_crates() {
    let toml = std::fs::read_to_string(core_dir().join("Cargo.toml")).expect("core/Cargo.toml");
    let deps = dependencies(&toml);
    assert!(
        !deps.is_empty(),
        "no [dependencies] parsed from core/Cargo.toml"
    );
    let bad: Vec<&String> = deps
        .iter()
        .filter(|d| !ALLOWED_DEPS.contains(&d.as_str()))
        .collect();
    assert!(
        bad.is_empty(),
        "core depends on {bad:?}; only {ALLOWED_DEPS:?} are allowed"
    );
}

#[test]
fn core_sources_touch_no_clock_file_socket_process_or_env() {
    let mut files = Vec::new();
    rust_files(&core_dir().join("src"), &mut files);
    assert!(
        files.len() > 5,
        "expected the core sources, found {files:?}"
    );
    let mut bad = Vec::new();
    for f in files {
        // Test-only modules: `tests.rs` files and everything under a `tests/` directory (the
        // `#[cfg(test)] mod tests;` of their parent).
        if f.file_name().is_some_and(|n| n == "tests.rs")
            || f.strip_prefix(core_dir().join("src"))
                .is_ok_and(|rel| rel.components().any(|c| c.as_os_str() == "tests"))
        {
            continue;
        }
        let src = std::fs::read_to_string(&f).expect("readable source");
        let src = src.split("#[cfg(test)]").next().unwrap_or("");
        for (line, name, why) in forbidden_uses(src) {
            bad.push(format!("{}:{line}: {name} ({why})", f.display()));
        }
    }
    assert!(
        bad.is_empty(),
        "the core must stay pure:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_purity_checks_can_fail() {
    assert_eq!(
        dependencies("[package]\nname = \"x\"\n[dependencies]\nserde.workspace = true\ntokio = \"1\"\n[dev-dependencies]\nquickcheck = \"1\"\n"),
        vec!["serde", "tokio"]
    );
    assert!(!forbidden_uses("use std::time::Instant;").is_empty());
    assert!(!forbidden_uses("use std::{collections::BTreeMap, fs};").is_empty());
    assert!(
        forbidden_uses("// std::fs in a comment is fine\nuse std::collections::BTreeMap;")
            .is_empty()
    );
}
