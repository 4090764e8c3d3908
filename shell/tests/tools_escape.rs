//! Path confinement: an escape by `..`, by an absolute path or by a symlink is refused in
//! `plan` and in `run`, and the outside file is neither read nor written.

mod tools_support;

use serde_json::{json, Value};
use tools_support::{Project, TempDir};

const SECRET: &str = "TOP SECRET outside the project\n";

/// A project next to an outside directory holding `secret.txt`, with symlinks out of it.
fn setup(tag: &str) -> (Project, TempDir) {
    let p = Project::new(tag);
    let outside = TempDir::new(&format!("{tag}-outside"));
    outside.write("secret.txt", SECRET);
    std::os::unix::fs::symlink(outside.path(), p.dir.path().join("outlink")).unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("secret.txt"),
        p.dir.path().join("secret-link.txt"),
    )
    .unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("new.txt"),
        p.dir.path().join("dangling.txt"),
    )
    .unwrap();
    p.dir.write("inside.txt", "inside\n");
    (p, outside)
}

/// Every tool call naming `path`, with the other arguments it needs.
fn calls(path: &str) -> Vec<(&'static str, Value)> {
    vec![
        ("read_file", json!({"path": path})),
        ("list_dir", json!({"path": path})),
        ("glob", json!({"pattern": "*", "path": path})),
        ("grep", json!({"pattern": "SECRET", "path": path})),
        ("write_file", json!({"path": path, "content": "pwned\n"})),
        (
            "edit_file",
            json!({"path": path, "old_string": "TOP", "new_string": "pwned"}),
        ),
    ]
}

async fn assert_all_refused(p: &Project, outside: &TempDir, path: &str, needle: &str) {
    for (name, args) in calls(path) {
        let msg = p.refused(name, args, needle).await;
        assert!(
            msg.starts_with(&format!("{name}: path escapes the project: ")),
            "{msg}"
        );
        assert!(!msg.contains("TOP SECRET"), "{msg}");
    }
    assert_eq!(
        outside.read_str("secret.txt"),
        SECRET,
        "outside file changed"
    );
    assert!(
        !outside.path().join("new.txt").exists(),
        "outside file created"
    );
}

#[tokio::test]
async fn dotdot_is_refused() {
    let (p, outside) = setup("esc-dotdot");
    let name = outside
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_string();
    assert_all_refused(
        &p,
        &outside,
        &format!("../{name}/secret.txt"),
        "`..` components are not allowed",
    )
    .await;
    assert_all_refused(
        &p,
        &outside,
        "sub/../../x",
        "`..` components are not allowed",
    )
    .await;
    assert_all_refused(&p, &outside, "..", "`..` components are not allowed").await;
}

#[tokio::test]
async fn absolute_outside_is_refused() {
    let (p, outside) = setup("esc-abs");
    let abs = outside.path().join("secret.txt");
    assert_all_refused(
        &p,
        &outside,
        abs.to_str().unwrap(),
        "absolute paths must be inside the project",
    )
    .await;
    assert_all_refused(
        &p,
        &outside,
        "/etc",
        "absolute paths must be inside the project",
    )
    .await;
}

#[tokio::test]
async fn symlinks_out_are_refused() {
    let (p, outside) = setup("esc-link");
    assert_all_refused(
        &p,
        &outside,
        "outlink/secret.txt",
        "a symlink resolves it to",
    )
    .await;
    assert_all_refused(&p, &outside, "outlink", "a symlink resolves it to").await;
    assert_all_refused(&p, &outside, "secret-link.txt", "a symlink resolves it to").await;
    // A dangling link pointing outside: a write through it would create the outside file.
    assert_all_refused(&p, &outside, "dangling.txt", "a symlink resolves it to").await;
    assert_all_refused(
        &p,
        &outside,
        "outlink/sub/new.txt",
        "a symlink resolves it to",
    )
    .await;
}

#[tokio::test]
async fn walks_do_not_follow_symlinks_out() {
    let (p, outside) = setup("esc-walk");
    let out = p.call("grep", json!({"pattern": "SECRET"})).await;
    assert!(out.ok);
    assert!(!out.output.contains("TOP SECRET"), "{}", out.output);
    let out = p.call("glob", json!({"pattern": "**/secret.txt"})).await;
    assert_eq!(out.output, "no files match **/secret.txt in .\n");
    drop(outside);
}

#[tokio::test]
async fn inside_paths_work_absolute_or_through_inner_links() {
    let (p, _outside) = setup("esc-inside");
    let abs = p.dir.path().join("inside.txt");
    let out = p
        .call("read_file", json!({"path": abs.to_str().unwrap()}))
        .await;
    assert_eq!(out.output, "     1\tinside\n");
    std::os::unix::fs::symlink("inside.txt", p.dir.path().join("alias.txt")).unwrap();
    let plan = p.plan(
        "edit_file",
        json!({"path": "alias.txt", "old_string": "inside", "new_string": "in"}),
    );
    assert_eq!(plan.targets, ["alias.txt", "inside.txt"]);
    let out = p
        .run(
            "edit_file",
            json!({"path": "alias.txt", "old_string": "inside", "new_string": "in"}),
        )
        .await;
    assert!(out.ok, "{}", out.output);
    assert_eq!(p.dir.read_str("inside.txt"), "in\n");
    assert!(
        p.dir.path().join("alias.txt").is_symlink(),
        "the link itself stays a link"
    );
}

#[tokio::test]
async fn run_rechecks_a_path_swapped_for_a_symlink_after_plan() {
    let (p, outside) = setup("esc-swap");
    p.dir.write("target.txt", "TOP\n");
    let args = json!({"path": "target.txt", "old_string": "TOP", "new_string": "pwned"});
    assert_eq!(p.plan("edit_file", args.clone()).invalid, None);
    std::fs::remove_file(p.dir.path().join("target.txt")).unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("secret.txt"),
        p.dir.path().join("target.txt"),
    )
    .unwrap();
    let out = p.run("edit_file", args).await;
    assert!(!out.ok);
    assert!(
        out.output
            .starts_with("edit_file: path escapes the project: target.txt"),
        "{}",
        out.output
    );
    assert_eq!(outside.read_str("secret.txt"), SECRET);
    let out = p.run("read_file", json!({"path": "target.txt"})).await;
    assert!(!out.ok && !out.output.contains("TOP SECRET"));
}
