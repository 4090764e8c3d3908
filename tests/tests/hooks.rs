//! Hooks through the real binary: `turn_end` refusals honored then passing, the bound
//! of 8 then `unverified` (and `-p` exit 4), a refusal that cannot be persisted, a blocking
//! `user_prompt_submit`, a timeout killing the hook's process group, and project hook files that
//! are unapproved or changed by the agent after the freeze (`hook_failed`, not run).

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use openmax_tests::*;
use serde_json::{json, Value};

fn write(dir: &Path, rel: &str, text: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// A user config for the mock with one `[[hooks]]` table (its body given).
fn config_with_hook(env: &TestEnv, mock: &MockServer, hook: &str) {
    env.mock_config(
        Flavor::Anthropic,
        &mock.base_url(),
        &format!("\n[[hooks]]\n{hook}\n"),
    );
}

fn of_type<'a>(evs: &'a [Value], ty: &str) -> Vec<&'a Value> {
    evs.iter().filter(|e| e["type"] == ty).collect()
}

/// A hook script (outside the project) that refuses its first `refusals` runs, saving each
/// payload as payload<n>.json next to it.
fn refusing_script(env: &TestEnv, refusals: u32) -> String {
    let dir = env.root.display().to_string();
    let path = env.root.join("refuse.sh");
    std::fs::write(
        &path,
        format!(
            "n=$(cat '{dir}/count' 2>/dev/null || echo 0); n=$((n+1)); echo $n > '{dir}/count'\n\
             cat > '{dir}/payload'$n.json\n\
             if [ $n -le {refusals} ]; then echo \"tests fail ($n)\" >&2; exit 2; fi\n"
        ),
    )
    .unwrap();
    path.display().to_string()
}

#[test]
fn turn_end_refuses_twice_then_passes() {
    let env = TestEnv::new();
    let mock = MockServer::start(vec![text_reply("a"), text_reply("b"), text_reply("c")]);
    let script = refusing_script(&env, 2);
    config_with_hook(
        &env,
        &mock,
        &format!("event = \"turn_end\"\ncommand = [\"sh\", \"{script}\"]\nblocking = true"),
    );
    env.trust();
    let mut s = env.stdio(&[]);
    s.user("fix it");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "end_turn", "{evs:?}");
    let refused = of_type(&evs, "turn_refused");
    assert_eq!(refused.len(), 2, "{evs:?}");
    for (i, r) in refused.iter().enumerate() {
        assert_eq!(r["hook"], "turn_end:sh");
        assert_eq!(r["reason"], format!("tests fail ({})", i + 1));
        assert_eq!(r["continuation"], i);
        assert_eq!(r["continuations_left"], 8 - i);
    }
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 3);
    assert!(reqs[1].body.to_string().contains("tests fail (1)"));
    assert!(reqs[2].body.to_string().contains("tests fail (2)"));
    let p: Value =
        serde_json::from_str(&std::fs::read_to_string(env.root.join("payload1.json")).unwrap())
            .unwrap();
    assert_eq!(p["event"], "turn_end");
    assert_eq!(p["session_id"], s.hello["session_id"]);
    assert_eq!(p["project"], env.project.display().to_string());
    assert_eq!(p["last_message"], "a");
    assert_eq!(
        (p["continuation"].clone(), p["continuations_left"].clone()),
        (json!(0), json!(8))
    );
    assert_eq!(s.finish().0, Some(0));
}

#[test]
fn turn_end_always_refusing_ends_unverified_after_8_and_p_exits_4() {
    let env = TestEnv::new();
    let mock = MockServer::start((0..18).map(|i| text_reply(&format!("r{i}"))).collect());
    let script = refusing_script(&env, 1000);
    config_with_hook(
        &env,
        &mock,
        &format!("event = \"turn_end\"\ncommand = [\"sh\", \"{script}\"]\nblocking = true"),
    );
    env.trust();
    let mut s = env.stdio(&[]);
    s.user("fix it");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "unverified");
    let refused = of_type(&evs, "turn_refused");
    assert_eq!(refused.len(), 8);
    assert_eq!(refused[7]["continuations_left"], 1);
    assert_eq!(mock.requests().len(), 9);
    assert_eq!(s.finish().0, Some(0));

    let out = env.run(&["-p", "fix it"]);
    assert_eq!(out.code, Some(4), "{}", out.stderr);
}

#[test]
fn refusal_that_cannot_be_persisted_ends_unverified() {
    // Tests run as root here, so a read-only session directory would not stop the writes.
    // Instead openmax runs under a file-size limit (RLIMIT_FSIZE, SIGXFSZ ignored so the write
    // fails with EFBIG): the header and the first records fit, the refusal's 60 KB reason does
    // not.
    let env = TestEnv::new();
    let mock = MockServer::start(vec![text_reply("a"), text_reply("b")]);
    let script = env.root.join("big.sh");
    std::fs::write(
        &script,
        "head -c 60000 /dev/zero | tr '\\0' x >&2; exit 2\n",
    )
    .unwrap();
    config_with_hook(
        &env,
        &mock,
        &format!(
            "event = \"turn_end\"\ncommand = [\"sh\", \"{}\"]\nblocking = true",
            script.display()
        ),
    );
    env.trust();
    let mut c = Command::new("sh");
    c.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &env.home)
        .env("OPENMAX_HOME", &env.home)
        .current_dir(&env.project)
        .args(["-c", "trap '' XFSZ; ulimit -f 80; exec \"$0\" --stdio"])
        .arg(openmax_bin());
    for (k, v) in &env.env {
        c.env(k, v);
    }
    let mut child = c
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(b"{\"cmd\":\"user\",\"text\":\"fix it\"}\n")
        .unwrap();
    drop(stdin);
    let out = wait_child(child);
    let lines: Vec<String> = BufReader::new(out.stdout.as_bytes())
        .lines()
        .map(|l| l.unwrap())
        .collect();
    assert_valid(&lines, &out.stderr);
    let evs: Vec<Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let done = evs
        .iter()
        .find(|e| e["type"] == "done")
        .unwrap_or_else(|| panic!("no done:\n{}\n{}", lines.join("\n"), out.stderr));
    assert_eq!(
        done["stop_reason"],
        "unverified",
        "{}\n{}",
        lines.join("\n"),
        out.stderr
    );
    assert!(
        of_type(&evs, "turn_refused").is_empty(),
        "nothing announced unpersisted"
    );
    assert_eq!(mock.requests().len(), 1, "the turn did not continue");
}

#[test]
fn user_prompt_submit_blocks_before_any_model_request() {
    let env = TestEnv::new();
    let mock = MockServer::start(vec![text_reply("never")]);
    config_with_hook(
        &env,
        &mock,
        "event = \"user_prompt_submit\"\ncommand = [\"sh\", \"-c\", \"echo 'no secrets' >&2; exit 2\"]\nblocking = true",
    );
    env.trust();
    let mut s = env.stdio(&[]);
    s.user("here is my password");
    let (_, reason) = s.turn();
    assert_eq!(reason, "blocked");
    assert!(mock.requests().is_empty());
    assert_eq!(s.finish().0, Some(0));
}

#[test]
fn hook_timing_out_is_killed_with_its_children() {
    let env = TestEnv::new();
    let mock = MockServer::start(vec![text_reply("a")]);
    let pidfile = env.root.join("child.pid");
    config_with_hook(
        &env,
        &mock,
        &format!(
            "event = \"turn_end\"\ncommand = [\"sh\", \"-c\", \"sleep 30 & echo $! > '{}'; wait\"]\nblocking = true\ntimeout_s = 0.5",
            pidfile.display()
        ),
    );
    env.trust();
    let mut s = env.stdio(&[]);
    s.user("go");
    let (evs, reason) = s.turn();
    assert_eq!(
        reason, "end_turn",
        "a crashed blocking hook lets the turn proceed"
    );
    let failed = of_type(&evs, "hook_failed");
    assert_eq!(failed.len(), 1, "{evs:?}");
    assert!(failed[0]["detail"].as_str().unwrap().contains("timed out"));
    let pid = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .to_string();
    let end = Instant::now() + DEADLINE;
    loop {
        // Gone, or a zombie nobody reaped yet (dead either way).
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat.rsplit(") ").next().and_then(|r| r.chars().next());
        if stat.is_empty() || state == Some('Z') {
            break;
        }
        assert!(
            Instant::now() < end,
            "the hook's child {pid} outlived it: {stat}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(s.finish().0, Some(0));
}

/// A project hook (agent-writable, so gated) that leaves a marker file (inside the project: a
/// project hook runs in the sandbox, which allows writes only there and in temp directories).
fn project_hook(env: &TestEnv, marker: &Path) {
    env.project_config(
        "[[hooks]]\nevent = \"turn_end\"\ncommand = [\"sh\", \"hooks/check.sh\"]\nblocking = true\n",
    );
    write(
        &env.project,
        "hooks/check.sh",
        &format!("echo ran >> '{}'\n", marker.display()),
    );
}

#[test]
fn project_hook_edited_by_the_agent_after_the_freeze_is_not_run() {
    let env = TestEnv::new();
    let marker = env.project.join("marker");
    let evil = env.project.join("evil");
    project_hook(&env, &marker);
    let mock = MockServer::start(vec![
        text_reply("first"),
        tool_reply(
            "w1",
            "write_file",
            json!({"path":"hooks/check.sh","content":format!("touch '{}'\n", evil.display())}),
        ),
        text_reply("second"),
    ]);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    env.trust();
    let out = env.run_on_tty(&["--approve", "hooks/check.sh"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let mut s = env.stdio(&[]);
    s.send(json!({"cmd":"approval_mode","mode":"auto"}));
    assert_eq!(s.event()["type"], "approval_mode");
    s.user("one");
    let (evs, _) = s.turn();
    assert!(of_type(&evs, "hook_failed").is_empty(), "{evs:?}");
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap(),
        "ran\n",
        "approved bytes ran"
    );

    s.user("two");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "end_turn");
    let failed = of_type(&evs, "hook_failed");
    assert_eq!(failed.len(), 1, "{evs:?}");
    assert_eq!(failed[0]["event"], "turn_end");
    assert!(failed[0]["detail"]
        .as_str()
        .unwrap()
        .contains("changed since the freeze"));
    assert!(!evil.exists(), "the edited hook did not run");
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "ran\n");
    assert_eq!(s.finish().0, Some(0));
}

#[test]
fn unapproved_project_hook_is_reported_and_not_run() {
    let env = TestEnv::new();
    let marker = env.project.join("marker");
    project_hook(&env, &marker);
    let mock = MockServer::start(vec![text_reply("hi")]);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    env.trust();
    let mut s = env.stdio(&[]);
    s.user("one");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "end_turn");
    let failed = of_type(&evs, "hook_failed");
    assert_eq!(failed.len(), 1, "{evs:?}");
    assert!(failed[0]["detail"]
        .as_str()
        .unwrap()
        .contains("openmax --approve hooks/check.sh"));
    assert!(!marker.exists());
    assert_eq!(s.finish().0, Some(0));
}

#[test]
fn observe_only_hook_failure_is_reported_and_the_turn_proceeds() {
    let env = TestEnv::new();
    write(&env.project, "a.txt", "hello\n");
    let mock = MockServer::start(vec![
        tool_reply("r1", "read_file", json!({"path":"a.txt"})),
        text_reply("read it"),
    ]);
    let payload = env.root.join("payload.json");
    config_with_hook(
        &env,
        &mock,
        &format!(
            "event = \"tool_end\"\ncommand = [\"sh\", \"-c\", \"cat > '{}'; echo broken >&2; exit 1\"]",
            payload.display()
        ),
    );
    env.trust();
    let mut s = env.stdio(&[]);
    s.user("read a.txt");
    let mut evs = s.until_type("hook_failed");
    if !evs.iter().any(|e| e["type"] == "done") {
        evs.extend(s.until_type("done"));
    }
    let done = evs.iter().find(|e| e["type"] == "done").unwrap();
    assert_eq!(done["stop_reason"], "end_turn");
    let failed = of_type(&evs, "hook_failed");
    assert_eq!(failed[0]["hook"], "tool_end:sh");
    assert_eq!(failed[0]["event"], "tool_end");
    let detail = failed[0]["detail"].as_str().unwrap();
    assert!(
        detail.contains("exit status: 1") && detail.contains("broken"),
        "{detail}"
    );
    let p: Value = serde_json::from_str(&std::fs::read_to_string(&payload).unwrap()).unwrap();
    assert_eq!(p["event"], "tool_end");
    assert_eq!(p["call_id"], "r1");
    assert_eq!(p["ok"], true);
    assert_eq!(p["project"], env.project.display().to_string());
    assert_eq!(s.finish().0, Some(0));
}
