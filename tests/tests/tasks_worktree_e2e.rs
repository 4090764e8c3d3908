//! End to end: `"isolation": "worktree"` through the real binary. The child works in a git
//! worktree on a new branch: its edit lands only on that branch (committed there by the parent
//! when the call ends), git reads work inside its sandbox, it cannot write the parent's project,
//! a worktree left unchanged is removed with its branch, and a project outside git is a clear
//! tool error. Every stream of the parent is validated when its session finishes.

use std::path::Path;
use std::process::Command;

use openmax_tests::*;
use serde_json::{json, Value};

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim_end().to_string()
}

/// A trusted project in `auto` mode that is a git repository with one commit (README.md),
/// where the child's sandbox sees it (outside the temp directory, which the sandbox replaces
/// with a private one: the worktree's git records lie in the project's `.git`).
fn setup(replies: Vec<Reply>) -> (TestEnv, MockServer) {
    let env = TestEnv::visible();
    let mock = MockServer::start(replies);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    env.trust();
    env.set_mode("auto");
    std::fs::remove_dir_all(env.project.join(".git")).unwrap();
    git(&env.project, &["init", "--quiet", "-b", "main"]);
    env.write("README.md", "hello\n");
    git(&env.project, &["add", "README.md"]);
    git(&env.project, &["commit", "--quiet", "-m", "first"]);
    (env, mock)
}

fn end_of<'a>(evs: &'a [Value], id: &str) -> &'a Value {
    evs.iter()
        .find(|e| e["type"] == "tool_end" && e["call_id"] == id)
        .unwrap_or_else(|| panic!("no tool_end for {id}: {:?}", types(evs)))
}

/// The value after `key` on the result's worktree line (`worktree: branch B at P …`).
fn field<'a>(out: &'a str, key: &str) -> &'a str {
    let line = out
        .lines()
        .find(|l| l.starts_with("worktree: "))
        .unwrap_or_else(|| panic!("no worktree line in {out}"));
    line.split(&format!(" {key} "))
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .unwrap_or_else(|| panic!("no {key} in {line}"))
}

#[test]
fn a_worktree_childs_edit_lands_only_on_its_branch() {
    let (env, mock) = setup(vec![]);
    let escape = env.project.join("escape.txt");
    mock.push(tool_reply(
        "t1",
        "task",
        json!({"description": "Edit the readme", "prompt": "Change README.md.", "isolation": "worktree"}),
    ));
    // The child: an edit, then git in its sandbox (reads work, a commit does not), and an
    // attempt at the parent's project.
    mock.push(tool_calls_reply(&[
        (
            "c1",
            "write_file",
            json!({"path": "README.md", "content": "hello from the child\n"}),
        ),
        (
            "c2",
            "shell",
            json!({"command": format!(
                "git status --porcelain; git diff --stat; git log --oneline | wc -l; \
                 git commit -qam mine 2>/dev/null; echo commit=$?; \
                 echo out > {}; echo escape=$?",
                escape.display()
            )}),
        ),
    ]));
    mock.push(text_reply("edited"));
    mock.push(text_reply("parent done"));
    let mut s = env.stdio(&[]);
    s.user("edit in isolation");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "end_turn", "{:?}", types(&evs));
    let end = end_of(&evs, "t1");
    assert_eq!(end["ok"], true, "{end}");
    let out = end["output"].as_str().unwrap();
    assert!(out.contains("README.md | 2 +-"), "{out}");
    assert!(out.ends_with("\n\nedited"), "{out}");
    let branch = field(out, "branch");
    let path = field(out, "at");
    assert!(branch.starts_with("openmax/edit-the-readme-"), "{out}");
    assert_eq!(s.finish().0, Some(0));

    // The edit is on the branch, and only there.
    assert_eq!(
        std::fs::read_to_string(env.project.join("README.md")).unwrap(),
        "hello\n"
    );
    assert_eq!(git(&env.project, &["status", "--porcelain"]), "");
    assert_eq!(
        git(&env.project, &["show", &format!("{branch}:README.md")]),
        "hello from the child"
    );
    assert_eq!(
        git(&env.project, &["log", "-1", "--format=%s", branch]),
        "openmax task: Edit the readme"
    );
    assert!(
        Path::new(path).join("README.md").exists(),
        "the changed worktree stays"
    );

    // Git worked in the child's sandbox, and the parent's project was out of its reach.
    let reqs = mock.requests();
    let child_second = reqs[2].body.to_string();
    assert!(child_second.contains(" M README.md"), "{child_second}");
    assert!(child_second.contains("README.md | 2 +-"), "{child_second}");
    assert!(child_second.contains("escape=1"), "{child_second}");
    // A commit would write the main repository's objects and refs: the parent commits instead.
    assert!(!child_second.contains("commit=0"), "{child_second}");
    assert!(!escape.exists(), "the child wrote the parent's project");
    assert!(first_text(&reqs[1].body).contains(branch));
}

/// The first user text of a logged Anthropic request.
fn first_text(body: &Value) -> String {
    body["messages"][0]["content"].to_string()
}

#[test]
fn a_worktree_with_no_changes_is_removed_with_its_branch() {
    let (env, mock) = setup(vec![
        tool_reply(
            "t1",
            "task",
            json!({"description": "look", "prompt": "Just look.", "isolation": "worktree"}),
        ),
        text_reply("nothing to change"),
        text_reply("parent done"),
    ]);
    let mut s = env.stdio(&[]);
    s.user("look in isolation");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "end_turn", "{:?}", types(&evs));
    let out = end_of(&evs, "t1")["output"].as_str().unwrap().to_string();
    assert!(
        out.contains("worktree: no changes; the worktree and its branch openmax/look-"),
        "{out}"
    );
    assert_eq!(s.finish().0, Some(0));
    assert_eq!(git(&env.project, &["branch", "--list", "openmax/*"]), "");
    assert_eq!(
        git(&env.project, &["worktree", "list", "--porcelain"])
            .lines()
            .filter(|l| l.starts_with("worktree "))
            .count(),
        1
    );
    let dir = env.project.join(".git/openmax-worktrees");
    assert_eq!(std::fs::read_dir(&dir).map(|d| d.count()).unwrap_or(0), 0);
    assert_eq!(mock.requests().len(), 3);
}

#[test]
fn a_worktree_task_outside_git_is_a_clear_tool_error() {
    let env = TestEnv::new();
    let mock = MockServer::start(vec![
        tool_reply(
            "t1",
            "task",
            json!({"description": "look", "prompt": "Just look.", "isolation": "worktree"}),
        ),
        text_reply("no git"),
    ]);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    env.trust();
    env.set_mode("auto");
    let mut s = env.stdio(&[]);
    s.user("look in isolation");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "end_turn", "{:?}", types(&evs));
    let end = end_of(&evs, "t1");
    assert_eq!(end["ok"], false);
    assert!(
        end["output"]
            .as_str()
            .unwrap()
            .contains("isolation \"worktree\" needs a git repository"),
        "{end}"
    );
    assert_eq!(s.finish().0, Some(0));
    assert_eq!(mock.requests().len(), 2, "no child was started");
}
