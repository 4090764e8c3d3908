//! This project's earlier prompts for Up/Down, kept in the project's state directory under
//! `$OPENMAX_HOME` (one JSON string a line, newest last, at most [`KEEP`] entries). A missing
//! or unreadable file is an empty history; a line that does not parse is skipped.

use std::io::Write;
use std::path::Path;

/// How many prompts are kept.
pub const KEEP: usize = 500;

/// The prompts, oldest first.
pub fn load(path: &Path) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    let mut v: Vec<String> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<String>(l).ok())
        .collect();
    let cut = v.len().saturating_sub(KEEP);
    v.drain(..cut);
    v
}

/// Append one prompt (best effort: a prompt history that cannot be written loses nothing of
/// the session). The file is rewritten to the last [`KEEP`] when it grows past twice that.
pub fn append(path: &Path, prompt: &str) {
    let line = serde_json::Value::String(prompt.to_string()).to_string();
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = writeln!(f, "{line}");
    }
    let all = load_all(path);
    if all > 2 * KEEP {
        let kept = load(path);
        let text: String = kept
            .iter()
            .map(|p| serde_json::Value::String(p.clone()).to_string() + "\n")
            .collect();
        let tmp = path.with_extension("jsonl.tmp");
        if std::fs::write(&tmp, text).is_ok() {
            let _ = std::fs::rename(&tmp, path);
        }
    }
}

fn load_all(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .map(|t| t.lines().count())
        .unwrap_or(0)
}
