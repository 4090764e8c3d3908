//! `glob` and `grep` over a generated 100,000-file tree: they finish, cap their output, and
//! respect `.gitignore`.

mod tools_support;

#[path = "tools_support/tree.rs"]
mod tree;

use serde_json::json;
use tools_support::Project;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn glob_and_grep_on_100k_files_respect_gitignore() {
    let p = Project::new("large");
    tree::generate(p.dir.path());

    let out = p.call("glob", json!({"pattern": "*.txt"})).await;
    assert!(out.ok);
    let lines: Vec<&str> = out.output.lines().collect();
    assert_eq!(lines.len(), 1001, "1000 paths and the notice");
    assert_eq!(lines[0], "d000/f0000.txt");
    assert_eq!(lines[999], "d000/f0999.txt");
    assert_eq!(
        lines[1000],
        "[100000 files match; showing the first 1000 (sorted); narrow the pattern or the path]"
    );
    assert!(!out.output.contains("ignored/"));

    let out = p.call("glob", json!({"pattern": "*.log"})).await;
    assert_eq!(out.output, "no files match *.log in .\n");
    let out = p.call("glob", json!({"pattern": "d05*/f05*.txt"})).await;
    assert!(
        out.output.ends_with(
            "[1000 files match; showing the first 1000 (sorted); narrow the pattern or the path]\n"
        ) || out.output.lines().count() == 1000
    );

    let out = p.call("grep", json!({"pattern": "NEEDLE"})).await;
    assert!(out.ok);
    let expected: String = (0..tree::DIRS)
        .map(|d| format!("d{d:03}/f0500.txt:2:NEEDLE here\n"))
        .collect();
    assert_eq!(out.output, expected);

    let out = p
        .call(
            "grep",
            json!({"pattern": "needle", "case_insensitive": true, "glob": "*.log"}),
        )
        .await;
    assert_eq!(out.output, "no matches for \"needle\" in .\n");
    let out = p
        .call("grep", json!({"pattern": "NEEDLE", "path": "d042"}))
        .await;
    assert_eq!(out.output, "d042/f0500.txt:2:NEEDLE here\n");
}
