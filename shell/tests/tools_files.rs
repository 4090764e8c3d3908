//! The file tools through `plan` and `run`: each success and each failure message.

mod tools_support;

use openmax_shell::tools::{builtin_schemas, is_builtin, BUILTIN_NAMES};
use serde_json::json;
use tools_support::Project;

#[test]
fn schemas_are_stable_and_described() {
    let schemas = builtin_schemas();
    let names: Vec<&str> = schemas.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "read_file",
            "list_dir",
            "glob",
            "grep",
            "write_file",
            "edit_file",
            "shell",
            "web_fetch",
            "task"
        ]
    );
    assert_eq!(names, BUILTIN_NAMES);
    for s in &schemas {
        assert!(is_builtin(&s.name));
        assert!(s.description.len() > 40, "{}", s.name);
        assert_eq!(s.parameters["type"], "object");
        assert_eq!(s.parameters["additionalProperties"], false);
        for (_, p) in s.parameters["properties"].as_object().expect("properties") {
            assert!(p["description"].is_string(), "{}", s.name);
        }
    }
    assert!(!is_builtin("mcp__x__y"));
    assert_eq!(builtin_schemas(), schemas);
}

#[tokio::test]
async fn unknown_tool_is_invalid() {
    let p = Project::new("unknown");
    let msg = p
        .refused("frobnicate", json!({}), "unknown tool `frobnicate`")
        .await;
    assert!(msg.contains("read_file, list_dir"), "{msg}");
}

#[tokio::test]
async fn read_file_numbers_lines() {
    let p = Project::new("read");
    p.dir.write("a.txt", "alpha\r\nbeta\n\ngamma");
    let plan = p.plan("read_file", json!({"path": "a.txt"}));
    assert!(!plan.mutating);
    assert_eq!(plan.targets, ["a.txt"]);
    assert_eq!(plan.summary, "read_file a.txt");
    let out = p.call("read_file", json!({"path": "a.txt"})).await;
    assert!(out.ok);
    assert_eq!(
        out.output,
        "     1\talpha\n     2\tbeta\n     3\t\n     4\tgamma\n"
    );
    let out = p
        .call(
            "read_file",
            json!({"path": "a.txt", "offset": 2, "limit": 2}),
        )
        .await;
    assert_eq!(
        out.output,
        "     2\tbeta\n     3\t\n[showing lines 2-3 of 4; the file continues: call read_file with offset=4 to read on]\n"
    );
    p.dir.write("empty.txt", "");
    let out = p.call("read_file", json!({"path": "empty.txt"})).await;
    assert!(out.ok);
    assert_eq!(out.output, "[empty.txt is empty]");
}

#[tokio::test]
async fn read_file_cuts_large_files_with_a_notice() {
    let mut p = Project::new("read-large");
    let text: String = (1..=3000).map(|i| format!("line {i}\n")).collect();
    p.dir.write("big.txt", &text);
    p.ctx.output_cap_bytes = 100_000;
    let out = p.call("read_file", json!({"path": "big.txt"})).await;
    assert!(out.ok);
    assert!(out.output.contains("  2000\tline 2000\n"));
    assert!(!out.output.contains("line 2001\n"));
    assert!(out.output.ends_with(
        "[showing lines 1-2000 of 3000; the file continues: call read_file with offset=2001 to read on]\n"
    ), "{}", &out.output[out.output.len() - 200..]);
    let out = p
        .call("read_file", json!({"path": "big.txt", "offset": 2001}))
        .await;
    assert!(out.output.starts_with("  2001\tline 2001\n"));
    assert!(out.output.ends_with("  3000\tline 3000\n"));
    // The byte cap cuts earlier, with the same kind of notice.
    p.ctx.output_cap_bytes = 1000;
    let out = p.call("read_file", json!({"path": "big.txt"})).await;
    assert!(out.output.len() < 1300, "{}", out.output.len());
    assert!(
        out.output.contains(
            "(output cut at 1000 bytes); the file continues: call read_file with offset="
        ),
        "{}",
        out.output
    );
    // A very long line is cut.
    p.dir.write("long.txt", "x".repeat(5000));
    let out = p.call("read_file", json!({"path": "long.txt"})).await;
    assert!(
        out.output.ends_with("… [line cut: 3000 more characters]\n"),
        "{}",
        out.output.len()
    );
}

#[tokio::test]
async fn read_file_refusals() {
    let p = Project::new("read-refuse");
    p.dir.write("bin.dat", b"ELF\x00\x01\x02");
    p.dir.write("latin1.txt", b"caf\xe9\n");
    p.dir.write("short.txt", "a\nb\n");
    std::fs::create_dir(p.dir.path().join("sub")).unwrap();
    let out = p.call("read_file", json!({"path": "bin.dat"})).await;
    assert!(!out.ok);
    assert_eq!(
        out.output,
        "read_file: bin.dat is a binary file (it contains NUL bytes); it cannot be shown as text"
    );
    let out = p.call("read_file", json!({"path": "latin1.txt"})).await;
    assert_eq!(
        out.output,
        "read_file: latin1.txt is not valid UTF-8 text (line 1); it cannot be shown as text"
    );
    let out = p.call("read_file", json!({"path": "sub"})).await;
    assert_eq!(
        out.output,
        "read_file: sub is a directory; use list_dir to see its entries"
    );
    let out = p.call("read_file", json!({"path": "nope.txt"})).await;
    assert_eq!(out.output, "read_file: file not found: nope.txt");
    let out = p
        .call("read_file", json!({"path": "short.txt", "offset": 5}))
        .await;
    assert!(!out.ok);
    assert_eq!(
        out.output,
        "read_file: offset 5 is past the end of short.txt (2 lines)"
    );
    p.refused(
        "read_file",
        json!({}),
        "read_file: missing required argument `path` (string)",
    )
    .await;
    p.refused(
        "read_file",
        json!({"path": "a", "offset": 0}),
        "argument `offset` must be an integer ≥ 1, got 0",
    )
    .await;
    p.refused(
        "read_file",
        json!({"path": "a", "lines": 3}),
        "unknown argument `lines` (accepted: path, offset, limit)",
    )
    .await;
    p.refused(
        "read_file",
        json!("a.txt"),
        "arguments must be a JSON object",
    )
    .await;
}

#[tokio::test]
async fn list_dir_sorted_marked_and_ignoring() {
    let p = Project::new("list");
    p.dir.write(".gitignore", "target/\n*.log\n");
    p.dir.write("b.txt", "");
    p.dir.write("a.txt", "");
    p.dir.write("src/main.rs", "");
    p.dir.write(".github/ci.yml", "");
    p.dir.write(".git/HEAD", "");
    p.dir.write("target/out", "");
    p.dir.write("x.log", "");
    let out = p.call("list_dir", json!({})).await;
    assert!(out.ok);
    assert_eq!(
        out.output,
        ".github/\n.gitignore\na.txt\nb.txt\nsrc/\n[2 more entries hidden by .gitignore/.ignore rules]\n"
    );
    let out = p.call("list_dir", json!({"path": "src"})).await;
    assert_eq!(out.output, "main.rs\n");
    std::fs::create_dir(p.dir.path().join("empty")).unwrap();
    let out = p.call("list_dir", json!({"path": "empty"})).await;
    assert_eq!(out.output, "[empty is empty]\n");
    let out = p.call("list_dir", json!({"path": "a.txt"})).await;
    assert!(!out.ok);
    assert_eq!(
        out.output,
        "list_dir: a.txt is a file, not a directory; use read_file to read it"
    );
    let out = p.call("list_dir", json!({"path": "nope"})).await;
    assert_eq!(out.output, "list_dir: directory not found: nope");
}

#[tokio::test]
async fn list_dir_caps_entries() {
    let p = Project::new("list-cap");
    let names: Vec<String> = (1..1200).map(|i| format!("f{i:04}")).collect();
    p.dir.write_linked("f0000", "", &names);
    let out = p.call("list_dir", json!({})).await;
    assert!(out.ok);
    assert!(out.output.starts_with("f0000\nf0001\n"));
    assert!(out.output.contains("f0999\n"));
    assert!(!out.output.contains("f1000"));
    assert!(out.output.ends_with(
        "[showing the first 1000 of 1200 entries; list a subdirectory or use glob to narrow]\n"
    ));
}

fn tree(p: &Project) {
    p.dir.write(".gitignore", "build/\n*.tmp\n");
    p.dir.write(".ignore", "vendor/\n");
    p.dir
        .write("src/main.rs", "fn main() {\n    println!(\"Hello\");\n}\n");
    p.dir.write(
        "src/lib.rs",
        "pub fn hello() -> &'static str {\n    \"hello\"\n}\r\n",
    );
    p.dir.write("src/deep/x/y.rs", "// HELLO deep\n");
    p.dir.write("README.md", "# hello project\n");
    p.dir.write("notes.tmp", "hello tmp\n");
    p.dir.write("build/gen.rs", "hello build\n");
    p.dir.write("vendor/dep.rs", "hello vendor\n");
    p.dir.write(".hidden/h.rs", "hello hidden\n");
    p.dir.write("data.bin", b"hello\x00binary");
}

#[tokio::test]
async fn glob_matches_sorted_and_ignoring() {
    let p = Project::new("glob");
    tree(&p);
    let out = p.call("glob", json!({"pattern": "*.rs"})).await;
    assert!(out.ok);
    assert_eq!(out.output, "src/deep/x/y.rs\nsrc/lib.rs\nsrc/main.rs\n");
    let out = p.call("glob", json!({"pattern": "src/*.rs"})).await;
    assert_eq!(out.output, "src/lib.rs\nsrc/main.rs\n");
    let out = p
        .call(
            "glob",
            json!({"pattern": "**/*.{rs,md}", "path": "src/deep"}),
        )
        .await;
    assert_eq!(out.output, "src/deep/x/y.rs\n");
    let out = p.call("glob", json!({"pattern": ".hidden/*.rs"})).await;
    assert_eq!(out.output, ".hidden/h.rs\n");
    let out = p.call("glob", json!({"pattern": "*.py"})).await;
    assert!(out.ok);
    assert_eq!(out.output, "no files match *.py in .\n");
    let plan = p.plan("glob", json!({"pattern": "*.rs", "path": "src"}));
    assert_eq!(
        (plan.mutating, plan.targets.clone(), plan.summary.as_str()),
        (false, vec!["src".to_string()], "glob *.rs in src")
    );
    p.refused(
        "glob",
        json!({"pattern": "a[b"}),
        "glob: invalid glob pattern \"a[b\"",
    )
    .await;
    p.refused(
        "glob",
        json!({"pattern": "../*"}),
        "must be relative and without `..`",
    )
    .await;
    p.refused(
        "glob",
        json!({"path": "src"}),
        "glob: missing required argument `pattern` (string)",
    )
    .await;
    let out = p
        .call("glob", json!({"pattern": "*", "path": "README.md"}))
        .await;
    assert!(!out.ok);
    assert_eq!(
        out.output,
        "glob: directory not found: README.md (`path` must be a directory)"
    );
}

#[tokio::test]
async fn glob_caps_results() {
    let p = Project::new("glob-cap");
    let names: Vec<String> = (1..1500).map(|i| format!("d/f{i:04}.txt")).collect();
    p.dir.write_linked("d/f0000.txt", "", &names);
    let out = p.call("glob", json!({"pattern": "*.txt"})).await;
    assert!(out.output.starts_with("d/f0000.txt\n"));
    assert!(out.output.contains("d/f0999.txt\n"));
    assert!(!out.output.contains("d/f1000.txt"));
    assert!(out.output.ends_with(
        "[1500 files match; showing the first 1000 (sorted); narrow the pattern or the path]\n"
    ));
}

#[tokio::test]
async fn grep_matches_lines_and_ignores() {
    let p = Project::new("grep");
    tree(&p);
    let out = p.call("grep", json!({"pattern": "hello"})).await;
    assert!(out.ok);
    assert_eq!(
        out.output,
        "README.md:1:# hello project\nsrc/lib.rs:1:pub fn hello() -> &'static str {\nsrc/lib.rs:2:    \"hello\"\n"
    );
    let out = p
        .call(
            "grep",
            json!({"pattern": "PRINTLN|deep", "case_insensitive": true, "glob": "*.rs"}),
        )
        .await;
    assert_eq!(
        out.output,
        "src/deep/x/y.rs:1:// HELLO deep\nsrc/main.rs:2:    println!(\"Hello\");\n"
    );
    // `$` anchors before a CRLF line ending too.
    let out = p
        .call("grep", json!({"pattern": "\\{$", "path": "src/lib.rs"}))
        .await;
    assert_eq!(
        out.output,
        "src/lib.rs:1:pub fn hello() -> &'static str {\n"
    );
    let out = p
        .call("grep", json!({"pattern": "hello", "path": ".hidden/h.rs"}))
        .await;
    assert_eq!(out.output, ".hidden/h.rs:1:hello hidden\n");
    let out = p.call("grep", json!({"pattern": "zzz"})).await;
    assert!(out.ok);
    assert_eq!(out.output, "no matches for \"zzz\" in .\n");
    let plan = p.plan("grep", json!({"pattern": "x", "path": "src"}));
    assert_eq!(
        (plan.mutating, plan.targets.clone()),
        (false, vec!["src".to_string()])
    );
    let msg = p
        .refused(
            "grep",
            json!({"pattern": "(unclosed"}),
            "grep: invalid regex \"(unclosed\"",
        )
        .await;
    assert!(msg.contains("unclosed group"), "{msg}");
    p.refused(
        "grep",
        json!({"pattern": "x", "case_insensitive": "yes"}),
        "argument `case_insensitive` must be a boolean",
    )
    .await;
    let out = p
        .call("grep", json!({"pattern": "x", "path": "missing"}))
        .await;
    assert_eq!(out.output, "grep: cannot search missing: not found");
}

#[tokio::test]
async fn grep_caps_output_with_totals() {
    let mut p = Project::new("grep-cap");
    let text: String = (0..500).map(|i| format!("match {i}\n")).collect();
    p.dir.write("a.txt", &text);
    p.dir.write("b.txt", &text);
    p.ctx.output_cap_bytes = 2000;
    let out = p.call("grep", json!({"pattern": "match"})).await;
    assert!(out.ok);
    assert!(out.output.starts_with("a.txt:1:match 0\n"));
    assert!(out.output.len() < 2200);
    assert!(
        out.output
            .contains("[1000 matching lines in 2 files; showing the first "),
        "{}",
        out.output
    );
    assert!(out
        .output
        .ends_with("; narrow the pattern, path or glob]\n"));
}

#[tokio::test]
async fn write_file_creates_and_diffs() {
    let p = Project::new("write");
    let args = json!({"path": "new/dir/a.txt", "content": "one\ntwo\n"});
    let plan = p.plan("write_file", args.clone());
    assert!(plan.mutating);
    assert_eq!(plan.targets, ["new/dir/a.txt"]);
    assert_eq!(plan.summary, "write_file new/dir/a.txt (new file) (+2 -0)");
    assert_eq!(
        plan.detail,
        "--- a/new/dir/a.txt\n+++ b/new/dir/a.txt\n@@ -0,0 +1,2 @@\n+one\n+two\n"
    );
    assert!(!p.dir.path().join("new").exists(), "plan must not write");
    let out = p.run("write_file", args).await;
    assert!(out.ok);
    assert_eq!(
        out.output,
        "created new/dir/a.txt: 2 lines, 8 bytes (+2 -0)"
    );
    assert_eq!(p.dir.read_str("new/dir/a.txt"), "one\ntwo\n");
    assert_eq!(out.diffs.len(), 1);
    assert_eq!(
        (
            out.diffs[0].path.as_str(),
            out.diffs[0].added,
            out.diffs[0].removed
        ),
        ("new/dir/a.txt", 2, 0)
    );
    assert_eq!(out.diffs[0].diff, plan.detail);

    let out = p
        .call(
            "write_file",
            json!({"path": "new/dir/a.txt", "content": "one\n2\nthree\n"}),
        )
        .await;
    assert_eq!(out.output, "wrote new/dir/a.txt: 3 lines, 12 bytes (+2 -1)");
    assert!(
        out.diffs[0].diff.contains(" one\n-two\n+2\n+three\n"),
        "{}",
        out.diffs[0].diff
    );
    // Unchanged content: no diff.
    let out = p
        .call(
            "write_file",
            json!({"path": "new/dir/a.txt", "content": "one\n2\nthree\n"}),
        )
        .await;
    assert!(out.ok && out.diffs.is_empty());
    p.refused(
        "write_file",
        json!({"path": "new"}),
        "write_file: missing required argument `content` (string)",
    )
    .await;
    p.refused(
        "write_file",
        json!({"path": "new", "content": ""}),
        "write_file: new is a directory",
    )
    .await;
    p.refused(
        "write_file",
        json!({"path": ".", "content": ""}),
        "write_file: the project root is a directory",
    )
    .await;
}

#[tokio::test]
async fn edit_file_replaces_once_or_all() {
    let p = Project::new("edit");
    p.dir.write("demo.txt", "hello world\nbye world\n");
    let args = json!({"path": "demo.txt", "old_string": "hello", "new_string": "hi"});
    let plan = p.plan("edit_file", args.clone());
    assert!(plan.mutating);
    assert_eq!(plan.summary, "edit_file demo.txt (+1 -1)");
    assert_eq!(plan.targets, ["demo.txt"]);
    assert_eq!(
        plan.detail,
        "--- a/demo.txt\n+++ b/demo.txt\n@@ -1,2 +1,2 @@\n-hello world\n+hi world\n bye world\n"
    );
    assert_eq!(
        p.dir.read_str("demo.txt"),
        "hello world\nbye world\n",
        "plan must not write"
    );
    let out = p.run("edit_file", args).await;
    assert!(out.ok);
    assert_eq!(out.output, "edited demo.txt: replaced 1 place (+1 -1)");
    assert_eq!(out.diffs[0].diff, plan.detail);
    assert_eq!(p.dir.read_str("demo.txt"), "hi world\nbye world\n");

    let msg = p.refused("edit_file", json!({"path": "demo.txt", "old_string": "world", "new_string": "earth"}),
        "edit_file: old_string matches 2 places in demo.txt; add surrounding lines to make it unique, or set replace_all to true").await;
    assert!(msg.ends_with("to replace every occurrence"));
    let out = p.call("edit_file", json!({"path": "demo.txt", "old_string": "world", "new_string": "earth", "replace_all": true})).await;
    assert_eq!(out.output, "edited demo.txt: replaced 2 places (+2 -2)");
    assert_eq!(p.dir.read_str("demo.txt"), "hi earth\nbye earth\n");

    p.refused("edit_file", json!({"path": "demo.txt", "old_string": "mars", "new_string": "x"}),
        "edit_file: old_string was not found in demo.txt; it must match the file's current text exactly").await;
    p.refused(
        "edit_file",
        json!({"path": "nope.txt", "old_string": "a", "new_string": "b"}),
        "edit_file: file not found: nope.txt (use write_file to create a file)",
    )
    .await;
    p.refused(
        "edit_file",
        json!({"path": "demo.txt", "old_string": "", "new_string": "b"}),
        "edit_file: old_string is empty",
    )
    .await;
    p.refused(
        "edit_file",
        json!({"path": "demo.txt", "old_string": "hi", "new_string": "hi"}),
        "old_string and new_string are identical",
    )
    .await;
    p.dir.write("bin.dat", b"\xff\xfe\x00");
    p.refused(
        "edit_file",
        json!({"path": "bin.dat", "old_string": "a", "new_string": "b"}),
        "edit_file: bin.dat is not a UTF-8 text file",
    )
    .await;
    assert_eq!(p.dir.read_str("demo.txt"), "hi earth\nbye earth\n");
}

#[tokio::test]
async fn edit_file_rechecks_at_run_time() {
    let p = Project::new("edit-recheck");
    p.dir.write("a.txt", "x = 1\n");
    let args = json!({"path": "a.txt", "old_string": "x = 1", "new_string": "x = 2"});
    assert_eq!(p.plan("edit_file", args.clone()).invalid, None);
    p.dir.write("a.txt", "x = 1\nx = 1\n");
    let out = p.run("edit_file", args).await;
    assert!(!out.ok);
    assert!(out.output.contains("matches 2 places"), "{}", out.output);
    assert_eq!(p.dir.read_str("a.txt"), "x = 1\nx = 1\n");
}

#[tokio::test]
async fn edit_file_preserves_crlf_and_missing_final_newline() {
    let p = Project::new("edit-eol");
    p.dir.write("win.txt", "first\r\nsecond\r\nthird\r\n");
    let out = p.call("edit_file", json!({"path": "win.txt", "old_string": "first\nsecond\n", "new_string": "1st\n2nd\n2.5\n"})).await;
    assert!(out.ok, "{}", out.output);
    assert_eq!(p.dir.read_str("win.txt"), "1st\r\n2nd\r\n2.5\r\nthird\r\n");
    assert_eq!((out.diffs[0].added, out.diffs[0].removed), (3, 2));

    p.dir.write("nofinal.txt", "a\nb\nc");
    let out = p
        .call(
            "edit_file",
            json!({"path": "nofinal.txt", "old_string": "c", "new_string": "C"}),
        )
        .await;
    assert!(out.ok);
    assert_eq!(p.dir.read_str("nofinal.txt"), "a\nb\nC");
    let out = p
        .call(
            "edit_file",
            json!({"path": "nofinal.txt", "old_string": "b\nC\n", "new_string": "B\n"}),
        )
        .await;
    assert!(out.ok, "{}", out.output);
    assert_eq!(p.dir.read_str("nofinal.txt"), "a\nB");
    assert!(
        out.diffs[0].diff.contains("\\ No newline at end of file"),
        "{}",
        out.diffs[0].diff
    );

    p.dir.write("winnofinal.txt", "a\r\nb");
    let out = p
        .call(
            "edit_file",
            json!({"path": "winnofinal.txt", "old_string": "b", "new_string": "b\nc"}),
        )
        .await;
    assert!(out.ok);
    assert_eq!(p.dir.read_str("winnofinal.txt"), "a\r\nb\r\nc");
}

#[tokio::test]
async fn special_files_are_refused() {
    let p = Project::new("special");
    let fifo = p.dir.path().join("pipe");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(status.success());
    let out = p.call("read_file", json!({"path": "pipe"})).await;
    assert_eq!(out.output, "read_file: pipe is not a regular file");
    p.refused(
        "write_file",
        json!({"path": "pipe", "content": "x"}),
        "write_file: pipe is not a regular file",
    )
    .await;
    let out = p
        .call("grep", json!({"pattern": "x", "path": "pipe"}))
        .await;
    assert_eq!(out.output, "grep: pipe is not a regular file or directory");
    p.dir.write("a.txt", "x\n");
    let out = p.call("grep", json!({"pattern": "x"})).await;
    assert_eq!(out.output, "a.txt:1:x\n", "the walk skips the fifo");
    p.dir.write("b.bin", b"x\x00");
    let out = p
        .call("grep", json!({"pattern": "x", "path": "b.bin"}))
        .await;
    assert!(out.ok);
    assert_eq!(
        out.output,
        "b.bin is a binary file (it contains NUL bytes); not searched\n"
    );
}

#[tokio::test]
async fn writes_replace_a_hard_link_instead_of_writing_through_it() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let p = Project::new("hardlink");
    let outside = TempDirOutside::new();
    std::fs::write(outside.file(), "outside\n").unwrap();
    std::fs::hard_link(outside.file(), p.dir.path().join("linked.txt")).unwrap();
    std::fs::hard_link(outside.file(), p.dir.path().join("edited.txt")).unwrap();
    let out = p
        .run(
            "write_file",
            json!({"path": "linked.txt", "content": "changed\n"}),
        )
        .await;
    assert!(out.ok, "{}", out.output);
    let out = p
        .run(
            "edit_file",
            json!({"path": "edited.txt", "old_string": "outside", "new_string": "edited"}),
        )
        .await;
    assert!(out.ok, "{}", out.output);
    assert_eq!(
        std::fs::read_to_string(outside.file()).unwrap(),
        "outside\n"
    );
    assert_eq!(p.dir.read_str("linked.txt"), "changed\n");
    assert_eq!(p.dir.read_str("edited.txt"), "edited\n");
    assert_eq!(std::fs::metadata(outside.file()).unwrap().nlink(), 1);
    // An executable keeps its permission bits; no temporary file is left behind.
    p.dir.write("run.sh", "#!/bin/sh\n");
    let script = p.dir.path().join("run.sh");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o750)).unwrap();
    let out = p
        .run(
            "write_file",
            json!({"path": "run.sh", "content": "#!/bin/sh\necho hi\n"}),
        )
        .await;
    assert!(out.ok, "{}", out.output);
    let mode = std::fs::metadata(&script).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o750);
    let names: Vec<String> = std::fs::read_dir(p.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("openmax-tmp"))
        .collect();
    assert!(names.is_empty(), "{names:?}");
}

/// A file outside any project, removed on drop.
struct TempDirOutside(std::path::PathBuf);

impl TempDirOutside {
    fn new() -> Self {
        let d = std::env::temp_dir().join(format!("omx-outside-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        TempDirOutside(d)
    }

    fn file(&self) -> std::path::PathBuf {
        self.0.join("secret.txt")
    }
}

impl Drop for TempDirOutside {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
