//! How a tool call looks to an ACP client: its kind, its title, the files it touches
//! (`locations`), and its diffs as ACP diff blocks.
//!
//! Invariants: pure functions of the wire event's fields; a path the model gave is only joined
//! to the project for display (never resolved or opened here: confinement is the tools' job);
//! a diff block is one hunk of the unified diff, its old and new text being the hunk's two
//! sides, and a hunk that starts at `-0,0` of an empty file is a new file (`oldText` null).

use std::path::{Path, PathBuf};

use agent_client_protocol_schema::v1::{Diff, ToolCallContent, ToolCallLocation, ToolKind};
use serde_json::{Map, Value};

/// The longest title shown for a call (characters).
const TITLE_MAX: usize = 120;

/// The ACP kind of a tool, by name: built-in read and search tools, edits, the shell; MCP and
/// external tools are `other`.
pub fn kind(name: &str) -> ToolKind {
    match name {
        "read_file" | "list_dir" => ToolKind::Read,
        "glob" | "grep" => ToolKind::Search,
        "write_file" | "edit_file" => ToolKind::Edit,
        "shell" => ToolKind::Execute,
        _ => ToolKind::Other,
    }
}

/// The argument that says what a call is about (a path, a pattern, a command).
fn subject(args: &Map<String, Value>) -> Option<&str> {
    ["command", "path", "pattern"]
        .iter()
        .find_map(|k| args.get(*k).and_then(Value::as_str))
}

/// A one-line title: the tool's name and its subject, cut to [`TITLE_MAX`] characters.
pub fn title(name: &str, args: &Map<String, Value>) -> String {
    let full = match subject(args) {
        Some(s) => format!("{name} {}", s.lines().next().unwrap_or("")),
        None => name.to_string(),
    };
    if full.chars().count() <= TITLE_MAX {
        return full;
    }
    let mut cut: String = full.chars().take(TITLE_MAX - 1).collect();
    cut.push('…');
    cut
}

/// The path a display path stands for: absolute paths as given, others under the project.
pub fn absolute(project: &Path, path: &str) -> PathBuf {
    let p = Path::new(path);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        project.join(p)
    }
}

/// The files a call touches: the `path` argument of the file tools.
pub fn locations(project: &Path, name: &str, args: &Map<String, Value>) -> Vec<ToolCallLocation> {
    let file_tool = matches!(
        name,
        "read_file" | "write_file" | "edit_file" | "list_dir" | "glob" | "grep"
    );
    match args.get("path").and_then(Value::as_str) {
        Some(p) if file_tool && !p.is_empty() => {
            vec![ToolCallLocation::new(absolute(project, p))]
        }
        _ => Vec::new(),
    }
}

/// The ACP diff blocks of a unified diff of `path`: one per hunk.
pub fn diff_blocks(project: &Path, path: &str, unified: &str) -> Vec<ToolCallContent> {
    let abs = absolute(project, path);
    hunks(unified)
        .into_iter()
        .map(|h| {
            let d = Diff::new(abs.clone(), h.new).old_text(h.old);
            ToolCallContent::Diff(d)
        })
        .collect()
}

/// One hunk's two sides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    /// `None` for a new file.
    pub old: Option<String>,
    pub new: String,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Both,
    Old,
    New,
}

/// Split a unified diff into its hunks' old and new text.
pub fn hunks(unified: &str) -> Vec<Hunk> {
    let mut out: Vec<Hunk> = Vec::new();
    let mut old = String::new();
    let mut new = String::new();
    let mut new_file = false;
    let mut open = false;
    let mut last = Side::Both;
    let finish = |out: &mut Vec<Hunk>, old: &mut String, new: &mut String, new_file: bool| {
        out.push(Hunk {
            old: (!new_file).then(|| std::mem::take(old)),
            new: std::mem::take(new),
        });
        old.clear();
    };
    for line in unified.split_inclusive('\n') {
        if let Some(header) = line.strip_prefix("@@ ") {
            if open {
                finish(&mut out, &mut old, &mut new, new_file);
            }
            open = true;
            new_file = header.starts_with("-0,0 ");
            continue;
        }
        if !open {
            continue; // the ---/+++ header
        }
        let (tag, body) = line.split_at(1.min(line.len()));
        match tag {
            " " => {
                old.push_str(body);
                new.push_str(body);
                last = Side::Both;
            }
            "-" => {
                old.push_str(body);
                last = Side::Old;
            }
            "+" => {
                new.push_str(body);
                last = Side::New;
            }
            "\\" => {
                // "\ No newline at end of file": the previous line had none.
                if matches!(last, Side::Both | Side::Old) && old.ends_with('\n') {
                    old.pop();
                }
                if matches!(last, Side::Both | Side::New) && new.ends_with('\n') {
                    new.pop();
                }
            }
            _ => {}
        }
    }
    if open {
        finish(&mut out, &mut old, &mut new, new_file);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::diff::unified;
    use serde_json::json;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn kinds_titles_and_locations() {
        assert_eq!(kind("read_file"), ToolKind::Read);
        assert_eq!(kind("list_dir"), ToolKind::Read);
        assert_eq!(kind("grep"), ToolKind::Search);
        assert_eq!(kind("glob"), ToolKind::Search);
        assert_eq!(kind("write_file"), ToolKind::Edit);
        assert_eq!(kind("edit_file"), ToolKind::Edit);
        assert_eq!(kind("shell"), ToolKind::Execute);
        assert_eq!(kind("mcp__everything__echo"), ToolKind::Other);
        let a = args(json!({"path": "src/a.rs"}));
        assert_eq!(title("read_file", &a), "read_file src/a.rs");
        let cmd = args(json!({"command": "cargo test\nrm -rf /"}));
        assert_eq!(title("shell", &cmd), "shell cargo test");
        let long = args(json!({"command": "x".repeat(500)}));
        assert_eq!(title("shell", &long).chars().count(), TITLE_MAX);
        let p = Path::new("/p");
        assert_eq!(
            locations(p, "read_file", &a),
            vec![ToolCallLocation::new("/p/src/a.rs")]
        );
        assert!(locations(p, "shell", &a).is_empty());
        assert!(locations(p, "grep", &args(json!({"pattern": "x"}))).is_empty());
    }

    #[test]
    fn hunks_give_both_sides() {
        let d = unified("x.txt", "a\nb\nc\n", "a\nB\nc\nd\n");
        assert_eq!(
            hunks(&d.diff),
            vec![Hunk {
                old: Some("a\nb\nc\n".into()),
                new: "a\nB\nc\nd\n".into()
            }]
        );
        let created = unified("n.txt", "", "hello\n");
        assert_eq!(
            hunks(&created.diff),
            vec![Hunk {
                old: None,
                new: "hello\n".into()
            }]
        );
        let no_nl = unified("y", "a", "b");
        assert_eq!(
            hunks(&no_nl.diff),
            vec![Hunk {
                old: Some("a".into()),
                new: "b".into()
            }]
        );
        let old: String = (0..40).map(|i| format!("{i}\n")).collect();
        let new: String = (0..40)
            .map(|i| match i {
                3 => "three\n".to_string(),
                30 => "thirty\n".to_string(),
                _ => format!("{i}\n"),
            })
            .collect();
        let two = hunks(&unified("z", &old, &new).diff);
        assert_eq!(two.len(), 2);
        assert!(two[0].new.contains("three\n") && !two[0].new.contains("thirty"));
        assert!(two[1].old.as_deref().unwrap().contains("30\n"));
        assert!(hunks("").is_empty());
    }
}
