//! End to end: undo of whole turns through the real binary and a scripted model. A turn edits
//! with `edit_file`, creates with `write_file`, and through `shell` runs `sed -i`, `rm`,
//! `mv a b`, `chmod +x`, makes a symlink and writes a file in an ignored directory; `openmax
//! undo` must give back every path's bytes, mode and link target exactly as a copy the test
//! took itself before the turn. Also: a human's later edit is kept and listed; undo twice
//! redoes; three turns then `--turn 2`; a turn with no writes makes no checkpoint; a SIGKILL
//! mid-turn leaves a checkpoint undo can use; the next turn is told. Runs with the sandbox on.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use openmax_tests::*;
use serde_json::{json, Value};

/// What the test records of one path: its kind, bytes, permission bits, link target.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Copy {
    File { bytes: Vec<u8>, mode: u32 },
    Dir { mode: u32 },
    Link { target: String },
}

/// The test's own copy of the project (`.git` left out), walked with std.
fn copy_of(root: &Path) -> BTreeMap<String, Copy> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Copy>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            if e.file_name() == ".git" {
                continue;
            }
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().to_string();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let mode = m.permissions().mode() & 0o7777;
            if m.file_type().is_symlink() {
                let target = std::fs::read_link(&p)
                    .unwrap()
                    .to_string_lossy()
                    .to_string();
                out.insert(rel, Copy::Link { target });
            } else if m.is_dir() {
                out.insert(rel, Copy::Dir { mode });
                walk(root, &p, out);
            } else {
                out.insert(
                    rel,
                    Copy::File {
                        bytes: std::fs::read(&p).unwrap(),
                        mode,
                    },
                );
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// The paths whose copy differs between `a` and `b`.
fn differing(a: &BTreeMap<String, Copy>, b: &BTreeMap<String, Copy>) -> Vec<String> {
    let mut out: Vec<String> = a
        .keys()
        .chain(b.keys())
        .filter(|k| a.get(*k) != b.get(*k))
        .cloned()
        .collect();
    out.sort();
    out.dedup();
    out
}

/// A trusted project in `auto` mode whose mock serves what each test pushes.
fn setup() -> (TestEnv, MockServer) {
    let env = TestEnv::new();
    let mock = MockServer::start(vec![]);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    env.trust();
    env.set_mode("auto");
    (env, mock)
}

/// One turn in a new session (or the latest with `resume`) where the model makes `calls` one
/// per reply, then says done; every call must succeed. Returns the turn's events.
fn turn(env: &TestEnv, mock: &MockServer, calls: &[(&str, Value)], resume: bool) -> Vec<Value> {
    for (i, (name, args)) in calls.iter().enumerate() {
        mock.push(tool_reply(&format!("c{i}"), name, args.clone()));
    }
    mock.push(text_reply("done"));
    let mut s = env.stdio(if resume { &["--continue"] } else { &[] });
    s.user("change the files");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "end_turn", "{:?}", types(&evs));
    for (i, _) in calls.iter().enumerate() {
        let end = evs
            .iter()
            .find(|e| e["type"] == "tool_end" && e["call_id"] == format!("c{i}"))
            .unwrap();
        assert_eq!(end["ok"], true, "call c{i} failed: {end}");
    }
    assert_eq!(s.finish().0, Some(0));
    evs
}

fn shell(cmd: &str) -> (&'static str, Value) {
    ("shell", json!({ "command": cmd }))
}

fn write(path: &str, content: &str) -> (&'static str, Value) {
    ("write_file", json!({ "path": path, "content": content }))
}

fn undo(env: &TestEnv, args: &[&str]) -> RunOutput {
    let mut all = vec!["undo"];
    all.extend_from_slice(args);
    env.run(&all)
}

/// The ids of the manifests the store holds for the project.
fn manifests(env: &TestEnv) -> Vec<String> {
    let mut out = Vec::new();
    for p in std::fs::read_dir(env.home.join("projects"))
        .unwrap()
        .flatten()
    {
        if let Ok(rd) = std::fs::read_dir(p.path().join("checkpoints/manifests")) {
            for m in rd.flatten() {
                out.push(
                    m.file_name()
                        .to_string_lossy()
                        .trim_end_matches(".json")
                        .to_string(),
                );
            }
        }
    }
    out
}

#[test]
fn a_turn_of_file_tools_and_shell_commands_is_undone_exactly() {
    let (env, mock) = setup();
    env.write(".gitignore", "build/\n");
    env.write("edit.txt", "alpha\nbeta\n");
    env.write("sed.txt", "one two\n");
    env.write("rm.txt", "to be removed\n");
    env.write("mv-a.txt", "moved\n");
    env.write("script.sh", "#!/bin/sh\necho hi\n");
    env.write("sub/keep.txt", "untouched\n");
    std::fs::set_permissions(
        env.project.join("script.sh"),
        std::fs::Permissions::from_mode(0o640),
    )
    .unwrap();
    std::fs::create_dir_all(env.project.join("build")).unwrap();
    let before = copy_of(&env.project);

    let calls = [
        (
            "edit_file",
            json!({"path":"edit.txt","old_string":"beta","new_string":"gamma"}),
        ),
        write("sub/new.txt", "brand new\n"),
        shell("sed -i 's/one/uno/' sed.txt"),
        shell("rm rm.txt"),
        shell("mv mv-a.txt mv-b.txt"),
        shell("chmod +x script.sh"),
        shell("ln -s edit.txt link"),
        shell("echo built > build/out.bin"),
    ];
    turn(&env, &mock, &calls, false);
    let after = copy_of(&env.project);
    // The turn did change every one of them (so the comparison below can fail).
    assert_eq!(
        differing(&before, &after),
        [
            "build/out.bin",
            "edit.txt",
            "link",
            "mv-a.txt",
            "mv-b.txt",
            "rm.txt",
            "script.sh",
            "sed.txt",
            "sub/new.txt"
        ]
    );

    // The session record notes the checkpoint with its turn.
    let sid = std::fs::read_dir(env.home.join("projects"))
        .unwrap()
        .flatten()
        .flat_map(|p| {
            std::fs::read_dir(p.path().join("checkpoints"))
                .unwrap()
                .flatten()
        })
        .find_map(|e| {
            e.file_name()
                .to_string_lossy()
                .strip_suffix(".jsonl")
                .map(str::to_string)
        })
        .expect("a checkpoint log");
    let record = std::fs::read_to_string(env.record_path(&sid)).unwrap();
    let cp: Value = record
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v["rec"] == "checkpoint")
        .expect("a checkpoint record");
    assert_eq!(cp["turn"], 1);
    assert_eq!(cp["moment"], "before");
    assert!(manifests(&env).contains(&cp["id"].as_str().unwrap().to_string()));
    assert!(record.contains(r#""rec":"turn_end","stop_reason":"end_turn","turn":1"#));

    let out = undo(&env, &[]);
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("undid turn 1"), "{}", out.stdout);
    for p in ["edit.txt", "rm.txt", "mv-b.txt", "build/out.bin", "link"] {
        assert!(out.stdout.contains(p), "{p} not listed:\n{}", out.stdout);
    }
    let restored = copy_of(&env.project);
    assert_eq!(
        differing(&before, &restored),
        Vec::<String>::new(),
        "{}",
        out.stdout
    );
}

#[test]
fn a_human_edit_after_the_turn_is_kept_and_listed_unless_forced() {
    let (env, mock) = setup();
    env.write("a.txt", "a0\n");
    env.write("b.txt", "b0\n");
    turn(
        &env,
        &mock,
        &[write("a.txt", "a1\n"), shell("echo b1 > b.txt")],
        false,
    );
    env.write("b.txt", "mine\n");
    let out = undo(&env, &[]);
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    assert_eq!(env.read("a.txt").as_deref(), Some("a0\n"));
    assert_eq!(env.read("b.txt").as_deref(), Some("mine\n"));
    let kept = out.stdout.split("kept as they are").nth(1).unwrap_or("");
    assert!(kept.contains("b.txt"), "{}", out.stdout);
    assert!(!kept.contains("a.txt"), "{}", out.stdout);
    // --force goes back to before turn 1 for b.txt too.
    let out = undo(&env, &["--turn", "1", "--force"]);
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    assert_eq!(env.read("b.txt").as_deref(), Some("b0\n"));
}

#[test]
fn undo_twice_redoes() {
    let (env, mock) = setup();
    env.write("a.txt", "before\n");
    env.write("gone.txt", "here\n");
    let before = copy_of(&env.project);
    turn(
        &env,
        &mock,
        &[shell(
            "echo after > a.txt && rm gone.txt && mkdir -p d/e && echo x > d/e/x",
        )],
        false,
    );
    let after = copy_of(&env.project);
    assert_ne!(before, after);
    let out = undo(&env, &[]);
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    assert_eq!(
        differing(&before, &copy_of(&env.project)),
        Vec::<String>::new()
    );
    let out = undo(&env, &[]);
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("undid the undo of turn 1"),
        "{}",
        out.stdout
    );
    assert_eq!(
        differing(&after, &copy_of(&env.project)),
        Vec::<String>::new()
    );
    let list = undo(&env, &["--list"]);
    assert_eq!(list.code, Some(0));
    assert_eq!(
        list.stdout.matches("\n  undo").count(),
        2,
        "{}",
        list.stdout
    );
}

#[test]
fn three_turns_then_turn_2_restores_the_state_before_turn_2() {
    let (env, mock) = setup();
    env.write("a.txt", "a0\n");
    env.write("b.txt", "b0\n");
    turn(&env, &mock, &[shell("echo a1 > a.txt")], false);
    let before_2 = copy_of(&env.project);
    turn(
        &env,
        &mock,
        &[shell("echo b2 > b.txt && echo c2 > c.txt")],
        true,
    );
    turn(&env, &mock, &[shell("echo a3 > a.txt && rm b.txt")], true);
    let list = undo(&env, &["--list"]);
    assert_eq!(list.code, Some(0), "{}", list.stderr);
    for t in ["turn 1 ", "turn 2 ", "turn 3 "] {
        assert!(list.stdout.contains(t), "{t}: {}", list.stdout);
    }
    assert!(list.stdout.contains("2 files +2 -1"), "{}", list.stdout);
    let out = undo(&env, &["--turn", "2"]);
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("undid turns 2-3"), "{}", out.stdout);
    assert_eq!(
        differing(&before_2, &copy_of(&env.project)),
        Vec::<String>::new()
    );
    assert_eq!(env.read("a.txt").as_deref(), Some("a1\n"));
    // A turn with no checkpoint is refused, naming the ones there are.
    let out = undo(&env, &["--turn", "7"]);
    assert_eq!(out.code, Some(1));
    assert!(
        out.stderr.contains("turn 7") && out.stderr.contains("1, 2, 3"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_turn_with_no_writes_makes_no_checkpoint() {
    let (env, mock) = setup();
    env.write("a.txt", "a\n");
    turn(
        &env,
        &mock,
        &[
            ("read_file", json!({"path":"a.txt"})),
            ("list_dir", json!({})),
        ],
        false,
    );
    assert!(manifests(&env).is_empty(), "{:?}", manifests(&env));
    let list = undo(&env, &["--list"]);
    assert_eq!(list.code, Some(0));
    assert!(list.stdout.contains("no checkpoint"), "{}", list.stdout);
    let out = undo(&env, &[]);
    assert_eq!(out.code, Some(2), "{}\n{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("no checkpoint"), "{}", out.stderr);
}

#[test]
fn a_sigkill_mid_turn_leaves_a_checkpoint_undo_uses() {
    let (env, mock) = setup();
    env.write("a.txt", "a0\n");
    env.write("b.txt", "b0\n");
    let before = copy_of(&env.project);
    mock.push(tool_reply(
        "c0",
        "shell",
        json!({"command": "echo a1 > a.txt && rm b.txt && touch c.txt && sleep 3217"}),
    ));
    let mut s = env.stdio(&[]);
    s.user("change and wait");
    s.until(|e| e["type"] == "tool_start");
    let end = std::time::Instant::now() + DEADLINE;
    while env.read("c.txt").is_none() {
        assert!(std::time::Instant::now() < end, "the command never ran");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    s.kill_hard();
    kill_all(&["sleep", "3217"]);
    let out = undo(&env, &[]);
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("did not end"), "{}", out.stdout);
    assert_eq!(
        differing(&before, &copy_of(&env.project)),
        Vec::<String>::new()
    );
}

#[test]
fn the_next_turn_is_told_what_the_undo_restored() {
    let (env, mock) = setup();
    env.write("a.txt", "a0\n");
    turn(&env, &mock, &[write("a.txt", "a1\n")], false);
    let out = undo(&env, &[]);
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    mock.push(text_reply("noted"));
    let mut s = env.stdio(&["--continue"]);
    s.user("what now?");
    let (evs, _) = s.turn();
    let note = find(&evs, "harness_note");
    assert_eq!(note["call_id"], "");
    let text = note["text"].as_str().unwrap();
    assert!(
        text.contains("undid turn 1") && text.contains("a.txt (restored)"),
        "{text}"
    );
    assert_eq!(s.finish().0, Some(0));
    let last = mock.requests().pop().unwrap();
    assert!(
        last.body
            .to_string()
            .contains("[openmax note] the human undid turn 1"),
        "{}",
        last.body
    );
    // Told once: a second continued turn carries no new note.
    mock.push(text_reply("ok"));
    let mut s = env.stdio(&["--continue"]);
    s.user("again");
    let (evs, _) = s.turn();
    assert!(!types(&evs).contains(&"harness_note".to_string()));
    assert_eq!(s.finish().0, Some(0));
}

#[test]
fn undo_is_refused_to_an_agent_and_gc_keeps_what_a_live_session_names() {
    let (env, mock) = setup();
    env.write("a.txt", "a0\n");
    turn(&env, &mock, &[write("a.txt", "a1\n")], false);
    let mut agent = env.command(&["undo"]);
    agent.env("OPENMAX_AGENT_SESSION", "x");
    let out = wait_child(
        agent
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    assert_eq!(out.code, Some(1));
    assert!(out.stderr.contains("started by an agent"), "{}", out.stderr);
    let gc = undo(&env, &["--gc"]);
    assert_eq!(gc.code, Some(0), "{}", gc.stderr);
    assert!(
        gc.stdout.contains("collected 0 session logs"),
        "{}",
        gc.stdout
    );
    let out = undo(&env, &[]);
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    assert_eq!(env.read("a.txt").as_deref(), Some("a0\n"));
}
