//! External tools, `--approve`, skills and `reload` through the real binary: the
//! `unapproved_source` gate with a `source_sha` the test recomputes itself, approvals over the
//! wire and in advance, the reduced environment, broken manifests, and attributed receipts.

use std::path::Path;

use openmax_tests::*;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// Write `rel` under `dir`, creating parents.
fn write(dir: &Path, rel: &str, text: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// The `greet` tool: a manifest naming a project script that echoes its stdin.
fn greet_tool(env: &TestEnv) {
    write(
        &env.project,
        ".openmax/tools/greet.json",
        r#"{"name":"greet","description":"Greet someone","parameters":{"type":"object","properties":{"who":{"type":"string"}},"required":["who"]},"command":["sh","tools/greet.sh"],"env":["GREET_TOKEN"]}"#,
    );
    write(&env.project, "tools/greet.sh", "cat; echo; echo v1\n");
}

/// The documented framing (shell/src/extensions/source.rs), computed independently: sha256 over,
/// per file in order, the project-relative path, NUL, the length in decimal, NUL, the bytes.
fn source_sha(project: &Path, files: &[&str]) -> String {
    let mut h = Sha256::new();
    for f in files {
        let bytes = std::fs::read(project.join(f)).unwrap();
        h.update(f.as_bytes());
        h.update([0]);
        h.update(bytes.len().to_string().as_bytes());
        h.update([0]);
        h.update(&bytes);
    }
    h.finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>()[..12]
        .to_string()
}

fn last_of<'a>(evs: &'a [Value], ty: &str) -> &'a Value {
    evs.iter()
        .rev()
        .find(|e| e["type"] == ty)
        .unwrap_or_else(|| panic!("no {ty} in {evs:?}"))
}

fn approve(s: &mut Session, req: &Value, yes: bool) {
    s.send(json!({"cmd":"approve","approval_id":req["approval_id"],"approved":yes}));
}

#[test]
fn external_tool_approved_over_the_wire_then_agent_edit_asks_again() {
    let env = TestEnv::new();
    greet_tool(&env);
    let mock = MockServer::start(vec![
        tool_reply("c1", "greet", json!({"who":"w"})),
        text_reply("greeted"),
        tool_reply(
            "w1",
            "write_file",
            json!({"path":"tools/greet.sh","content":"cat; echo; echo v2\n"}),
        ),
        tool_reply("c2", "greet", json!({"who":"w"})),
        text_reply("done"),
        tool_reply("c3", "greet", json!({"who":"w"})),
        text_reply("again"),
    ]);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    env.trust();
    let files = [".openmax/tools/greet.json", "tools/greet.sh"];
    let sha1 = source_sha(&env.project, &files);
    let mut s = env.stdio(&[]);

    s.user("greet w");
    let evs = s.until_type("approval_request");
    let req = evs.last().unwrap().clone();
    assert_eq!(req["reason"], "unapproved_source");
    assert_eq!(req["name"], "greet");
    assert_eq!(req["source_path"], ".openmax/tools/greet.json");
    assert_eq!(
        req["source_sha"],
        sha1.as_str(),
        "the wire sha is the framed sha256"
    );
    assert_eq!(req["env"], json!(["GREET_TOKEN"]));

    // reload while the turn waits on the approval is refused.
    s.send(json!({"cmd":"reload"}));
    let e = s.event();
    assert_eq!(e["type"], "protocol_error", "{e}");
    assert!(e["message"].as_str().unwrap().contains("in flight"), "{e}");

    approve(&mut s, &req, true);
    let (evs, reason) = s.turn();
    assert_eq!(reason, "end_turn");
    let end = last_of(&evs, "tool_end");
    assert_eq!(end["ok"], true, "{end}");
    let out = end["output"].as_str().unwrap();
    assert!(
        out.contains(r#"{"who":"w"}"#) && out.contains("v1"),
        "{out}"
    );

    // The agent rewrites the script with its own write_file: new bytes, a new request.
    s.user("change it");
    let evs = s.until_type("approval_request");
    let gate = evs.last().unwrap().clone();
    assert_eq!(gate["reason"], "gate");
    approve(&mut s, &gate, true);
    let evs = s.until_type("approval_request");
    let req2 = evs.last().unwrap().clone();
    let sha2 = source_sha(&env.project, &files);
    assert_ne!(sha1, sha2);
    assert_eq!(req2["reason"], "unapproved_source");
    assert_eq!(req2["source_sha"], sha2.as_str());
    approve(&mut s, &req2, true);
    let (evs, reason) = s.turn();
    assert_eq!(reason, "end_turn");
    let out = last_of(&evs, "tool_end")["output"].as_str().unwrap();
    assert!(out.contains("v2"), "{out}");

    // The wire approval was stored for exactly these bytes: the next call runs unasked.
    s.user("once more");
    let (evs, _) = s.turn();
    assert!(
        !types(&evs).contains(&"approval_request".to_string()),
        "{evs:?}"
    );
    assert_eq!(last_of(&evs, "tool_end")["ok"], true);
    assert_eq!(s.finish().0, Some(0));
}

#[test]
fn an_approval_that_cannot_be_recorded_is_a_protocol_error_before_it_settles() {
    let env = TestEnv::new();
    greet_tool(&env);
    let mock = MockServer::start(vec![
        tool_reply("c1", "greet", json!({"who":"w"})),
        text_reply("greeted"),
        tool_reply("c2", "greet", json!({"who":"w"})),
        text_reply("again"),
    ]);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    env.trust();
    // The project's approval store cannot be written: its lock file is a directory.
    let state = std::fs::read_dir(env.home.join("projects"))
        .unwrap()
        .next()
        .expect("the project's state dir")
        .unwrap()
        .path();
    std::fs::create_dir_all(state.join("approvals.lock")).unwrap();
    let mut s = env.stdio(&[]);

    s.user("greet w");
    let req = s.until_type("approval_request").last().unwrap().clone();
    assert_eq!(req["reason"], "unapproved_source");
    approve(&mut s, &req, true);
    let (evs, reason) = s.turn();
    assert_eq!(reason, "end_turn");
    let t = types(&evs);
    let err = t
        .iter()
        .position(|t| t == "protocol_error")
        .expect("a protocol_error");
    let settled = t.iter().position(|t| t == "approval_settled").unwrap();
    assert!(err < settled, "{t:?}");
    let msg = evs[err]["message"].as_str().unwrap();
    assert!(
        msg.contains(".openmax/tools/greet.json") && msg.contains("could not be recorded"),
        "{msg}"
    );
    assert_eq!(evs[settled]["outcome"], "approved");
    // The human's approval covers this call: it ran.
    assert_eq!(last_of(&evs, "tool_end")["ok"], true);

    // Nothing was recorded, so the next call of the same bytes asks again.
    s.user("once more");
    let req2 = s.until_type("approval_request").last().unwrap().clone();
    assert_eq!(req2["reason"], "unapproved_source");
    approve(&mut s, &req2, false);
    let (_, reason) = s.turn();
    assert_eq!(reason, "end_turn");
    let (code, _, stderr) = s.finish();
    assert_eq!(code, Some(0));
    assert!(!stderr.contains("could not record"), "{stderr}");
}

#[test]
fn approve_in_advance_skips_the_request_and_agents_cannot_approve() {
    let env = TestEnv::new();
    greet_tool(&env);
    let mock = MockServer::start(vec![
        tool_reply("c1", "greet", json!({"who":"a"})),
        text_reply("declined"),
        tool_reply("c2", "greet", json!({"who":"b"})),
        text_reply("ran"),
    ]);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    env.trust();
    let sha = source_sha(
        &env.project,
        &[".openmax/tools/greet.json", "tools/greet.sh"],
    );

    // An agent-spawned openmax may not approve.
    let child = env
        .command(&["--approve", ".openmax/tools/greet.json"])
        .env("OPENMAX_AGENT_SESSION", "someone")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_child(child);
    assert_eq!(out.code, Some(1));
    assert!(out.stderr.contains("started by an agent"), "{}", out.stderr);

    // So the tool still asks.
    let mut s = env.stdio(&[]);
    s.user("greet a");
    let evs = s.until_type("approval_request");
    let req = evs.last().unwrap().clone();
    assert_eq!(req["reason"], "unapproved_source");
    approve(&mut s, &req, false);
    let (evs, _) = s.turn();
    assert_eq!(last_of(&evs, "tool_end")["ok"], false);
    assert_eq!(s.finish().0, Some(0));

    // A human approves in advance: shown path, sha and env grant.
    let out = env.run_on_tty(&["--approve", ".openmax/tools/greet.json"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stdout.contains(".openmax/tools/greet.json"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains(&sha), "{}", out.stdout);
    assert!(
        out.stdout.contains("env grant: GREET_TOKEN"),
        "{}",
        out.stdout
    );

    let mut s = env.stdio(&[]);
    s.user("greet b");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "end_turn");
    assert!(
        !types(&evs).contains(&"approval_request".to_string()),
        "{evs:?}"
    );
    let end = last_of(&evs, "tool_end");
    assert_eq!(end["ok"], true, "{end}");
    assert_eq!(s.finish().0, Some(0));
}

#[test]
fn external_tool_gets_only_path_home_lang_and_its_allowlist() {
    let mut env = TestEnv::new();
    env.env.push(("ALLOWED_TOKEN".into(), "granted".into()));
    env.env.push(("SECRET_TOKEN".into(), "hunter2".into()));
    env.env.push(("LANG".into(), "C.UTF-8".into()));
    write(
        &env.project,
        ".openmax/tools/showenv.json",
        r#"{"name":"showenv","description":"Print the environment","parameters":{"type":"object"},"command":["env"],"env":["ALLOWED_TOKEN"]}"#,
    );
    let mock = MockServer::start(vec![
        tool_reply("c1", "showenv", json!({})),
        text_reply("ok"),
    ]);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    env.trust();
    let mut s = env.stdio(&[]);
    // auto: no request is sent, even for unapproved bytes (the contract).
    s.send(json!({"cmd":"approval_mode","mode":"auto"}));
    assert_eq!(s.event()["type"], "approval_mode");
    s.user("show env");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "end_turn");
    assert!(!types(&evs).contains(&"approval_request".to_string()));
    let out = last_of(&evs, "tool_end")["output"]
        .as_str()
        .unwrap()
        .to_string();
    let mut names: Vec<&str> = out
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "ALLOWED_TOKEN",
            "HOME",
            "LANG",
            "OPENMAX_AGENT_SESSION",
            "PATH",
            // The sandbox's private temp directory.
            "TMPDIR"
        ],
        "{out}"
    );
    assert!(out.contains("ALLOWED_TOKEN=granted") && !out.contains("hunter2"));
    let sid = s.hello["session_id"].as_str().unwrap().to_string();
    assert!(
        out.contains(&format!("OPENMAX_AGENT_SESSION={sid}")),
        "{out}"
    );
    assert_eq!(s.finish().0, Some(0));
}

#[test]
fn broken_manifest_is_reported_while_the_others_load() {
    let env = TestEnv::new();
    greet_tool(&env);
    write(&env.project, ".openmax/tools/bad.json", "{ not json");
    let mock = MockServer::start(vec![text_reply("hello")]);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    env.trust();
    let mut s = env.stdio(&[]);
    s.user("hi");
    let (evs, _) = s.turn();
    let note = evs
        .iter()
        .find(|e| e["type"] == "harness_note")
        .unwrap_or_else(|| panic!("no harness_note: {evs:?}"));
    assert_eq!(note["call_id"], "");
    assert!(
        note["text"].as_str().unwrap().contains("bad.json"),
        "{note}"
    );
    let body = mock.requests()[0].body.to_string();
    assert!(body.contains("\"greet\""), "the valid tool loaded");
    assert!(body.contains("bad.json"), "the model was told");
    let (code, _, stderr) = s.finish();
    assert_eq!(code, Some(0));
    assert!(stderr.contains(".openmax/tools/bad.json"), "{stderr}");
}

#[test]
fn reload_attributes_agent_skill_edit_and_outside_prompt_edit() {
    let env = TestEnv::new();
    write(
        &env.project,
        ".openmax/skills/rel/SKILL.md",
        "---\nname: rel\ndescription: Release steps\n---\nStep one.\n",
    );
    let mock = MockServer::start(vec![
        tool_reply("s1", "skill", json!({"name":"rel"})),
        tool_reply(
            "w1",
            "write_file",
            json!({"path":".openmax/skills/rel/SKILL.md","content":"---\nname: rel\ndescription: Release steps\n---\nStep two.\n"}),
        ),
        text_reply("edited"),
        tool_reply("s2", "skill", json!({"name":"rel"})),
        text_reply("after"),
    ]);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    env.trust();
    let mut s = env.stdio(&[]);
    s.send(json!({"cmd":"approval_mode","mode":"auto"}));
    assert_eq!(s.event()["type"], "approval_mode");
    s.user("release");
    let (evs, _) = s.turn();
    let first = evs.iter().find(|e| e["type"] == "tool_end").unwrap();
    assert_eq!(first["output"], "Step one.\n");
    let tools = &mock.requests()[0].body["tools"];
    assert!(tools.to_string().contains("\"skill\""), "{tools}");

    // Someone outside adds the project's AGENTS.md.
    write(&env.project, "AGENTS.md", "Always run the tests.\n");
    s.send(json!({"cmd":"reload"}));
    let evs = s.until_type("refrozen");
    let r = evs.last().unwrap();
    assert_eq!(r["skills"], json!(["rel"]));
    let mut changes = r["changes"].as_array().unwrap().clone();
    changes.sort_by_key(|c| c["path"].as_str().unwrap().to_string());
    assert_eq!(
        changes,
        vec![
            json!({"kind":"skill","name":"rel","change":"changed","path":".openmax/skills/rel/SKILL.md","by":"agent"}),
            json!({"kind":"prompt","name":"project AGENTS.md","change":"added","path":"AGENTS.md","by":"outside"}),
        ]
    );
    s.user("again");
    let (evs, _) = s.turn();
    let note = evs.iter().find(|e| e["type"] == "harness_note").unwrap();
    assert!(note["text"]
        .as_str()
        .unwrap()
        .contains("this session's agent"));
    assert_eq!(last_of(&evs, "tool_end")["output"], "Step two.\n");
    let body = mock.requests()[3].body.to_string();
    assert!(
        body.contains("Always run the tests."),
        "the new prompt is sent"
    );
    assert_eq!(s.finish().0, Some(0));
}
