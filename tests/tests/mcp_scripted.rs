//! MCP behaviour the real servers cannot be made to show on demand, against a scripted stdio
//! server (`tests/mcp/scripted_server.py`, Python stdlib only) through the real binary and the
//! loopback model mock: every page of `tools/list` joins the tool set; `tools/list_changed` is
//! a `harness_note`; `readOnlyHint` (without `destructiveHint`) is what lets a tool of a user
//! server run without asking in `ask` and at all in `readonly`; a server that dies mid-call is
//! restarted once, on its next call, and not again until `reload`; a call past
//! `tool_timeout_s` fails naming it and is cancelled at the server; permission rules match the
//! full name with a glob; a project `.openmax/config.toml` server is not started until
//! `openmax --approve` stores the approval of its bytes.

use std::path::{Path, PathBuf};

use openmax_tests::*;
use serde_json::{json, Value};

/// A trusted project whose user config has the scripted server `s`; returns the file each
/// start of the server appends a line to.
fn setup(replies: Vec<Reply>, mode: &str) -> (TestEnv, MockServer, PathBuf) {
    let env = TestEnv::new();
    let mock = MockServer::start(replies);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/scripted_server.py");
    let starts = env.root.join("starts.txt");
    let mut text = std::fs::read_to_string(env.home.join("config.toml")).unwrap();
    text.push_str(&format!(
        "\n[mcp_servers.s]\ncommand = \"python3\"\nargs = [{:?}, {:?}]\n",
        script.display().to_string(),
        starts.display().to_string()
    ));
    env.user_config(&text);
    env.trust();
    env.set_mode(mode);
    (env, mock, starts)
}

fn call(id: &str, tool: &str) -> Reply {
    tool_reply(id, &format!("mcp__s__{tool}"), json!({}))
}

/// Run a turn, answering every approval request with `approve`; returns the events and the
/// names of the tools that asked.
fn turn_answering(s: &mut Session, approve: bool) -> (Vec<Value>, Vec<String>) {
    let mut evs = Vec::new();
    let mut asked = Vec::new();
    loop {
        let e = s.event();
        if e["type"] == "approval_request" {
            assert_eq!(e["reason"], "gate", "{e}");
            asked.push(e["name"].as_str().unwrap().to_string());
            s.approve(&e["approval_id"], approve);
        }
        let done = e["type"] == "done";
        evs.push(e);
        if done {
            return (evs, asked);
        }
    }
}

fn ends(evs: &[Value]) -> Vec<(String, bool, String)> {
    let names: std::collections::BTreeMap<String, String> = evs
        .iter()
        .filter(|e| e["type"] == "tool_start")
        .map(|e| {
            (
                e["call_id"].as_str().unwrap().to_string(),
                e["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    evs.iter()
        .filter(|e| e["type"] == "tool_end")
        .map(|e| {
            (
                names[e["call_id"].as_str().unwrap()].clone(),
                e["ok"].as_bool().unwrap(),
                e["output"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn every_page_of_tools_list_is_offered_and_list_changed_is_a_note() {
    let (env, mock, _) = setup(vec![text_reply("hello")], "auto");
    let mut s = env.stdio(&[]);
    s.user("hi");
    s.turn();
    let tools = offered_tools(&mock.requests()[0].body);
    for t in ["look", "poke", "wipe", "crash"] {
        assert!(tools.contains(&format!("mcp__s__{t}")), "{t}: {tools:?}");
    }
    // The server said its tools changed right after `initialize`: a note saying that `reload`
    // picks it up (whenever it arrives), and the frozen set stays as listed.
    let changed =
        |l: &str| l.contains("MCP server s says its tools changed") && l.contains("`reload`");
    if !s.seen.iter().any(|l| changed(l)) {
        s.until(|e| e["type"] == "harness_note" && changed(&e["text"].to_string()));
    }
    s.finish();
}

#[test]
fn read_only_hint_lets_a_tool_run_unasked_in_ask_and_at_all_in_readonly() {
    let replies = vec![
        tool_calls_reply(&[
            ("c1", "mcp__s__look", json!({})),
            ("c2", "mcp__s__poke", json!({})),
            ("c3", "mcp__s__wipe", json!({})),
        ]),
        text_reply("asked"),
    ];
    let (env, mock, _) = setup(replies, "ask");
    let mut s = env.stdio(&[]);
    s.user("use them");
    let (evs, asked) = turn_answering(&mut s, true);
    assert_eq!(
        asked,
        ["mcp__s__poke", "mcp__s__wipe"],
        "only the tool marked readOnlyHint (and not destructiveHint) runs unasked"
    );
    let got = ends(&evs);
    assert!(got.iter().all(|(_, ok, _)| *ok), "{got:?}");
    s.finish();

    env.set_mode("readonly");
    mock.push(tool_calls_reply(&[
        ("d1", "mcp__s__look", json!({})),
        ("d2", "mcp__s__poke", json!({})),
        ("d3", "mcp__s__wipe", json!({})),
    ]));
    mock.push(text_reply("refused"));
    let mut s = env.stdio(&[]);
    s.user("use them read-only");
    let (evs, asked) = turn_answering(&mut s, true);
    assert!(asked.is_empty(), "readonly never asks: {asked:?}");
    let got = ends(&evs);
    let ok: Vec<(&str, bool)> = got.iter().map(|(n, ok, _)| (n.as_str(), *ok)).collect();
    assert_eq!(
        ok,
        [
            ("mcp__s__look", true),
            ("mcp__s__poke", false),
            ("mcp__s__wipe", false)
        ],
        "{got:?}"
    );
    assert_eq!(got[0].2, "look ran");
    s.finish();
}

#[test]
fn a_server_that_dies_twice_is_restarted_once_then_fails_until_reload() {
    let replies = vec![
        call("c1", "crash"),
        call("c2", "look"),
        call("c3", "crash"),
        call("c4", "look"),
        text_reply("first"),
        call("c5", "look"),
        text_reply("after reload"),
    ];
    let (env, _mock, starts) = setup(replies, "auto");
    let started = || {
        std::fs::read_to_string(&starts)
            .unwrap_or_default()
            .lines()
            .count()
    };
    let mut s = env.stdio(&[]);
    // Started at freeze, before `hello` (setting the mode ran a session of its own too).
    let at_freeze = started();
    s.user("crash it twice");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "end_turn", "the turn goes on: {evs:?}");
    let got = ends(&evs);
    let out: Vec<(&str, bool)> = got.iter().map(|(n, ok, _)| (n.as_str(), *ok)).collect();
    assert_eq!(
        out,
        [
            ("mcp__s__crash", false),
            ("mcp__s__look", true),
            ("mcp__s__crash", false),
            ("mcp__s__look", false)
        ],
        "{got:?}"
    );
    assert!(
        got[0]
            .2
            .contains("failed during the call (the connection closed)"),
        "{}",
        got[0].2
    );
    assert!(
        got[3].2.contains("already restarted once") && got[3].2.contains("`reload`"),
        "{}",
        got[3].2
    );
    assert_eq!(started(), at_freeze + 1, "restarted once");
    s.send(json!({"cmd": "reload"}));
    s.until_type("refrozen");
    s.user("after the reload");
    let (evs, _) = s.turn();
    let got = ends(&evs);
    assert_eq!(got.len(), 1);
    assert!(got[0].1, "reload starts it anew: {got:?}");
    assert_eq!(started(), at_freeze + 2);
    s.finish();
}

#[test]
fn permission_rules_match_the_full_name_with_a_glob() {
    let replies = vec![
        tool_calls_reply(&[
            ("c1", "mcp__s__look", json!({})),
            ("c2", "mcp__s__poke", json!({})),
        ]),
        text_reply("ruled"),
    ];
    let (env, _mock, _) = setup(replies, "auto");
    let mut text = std::fs::read_to_string(env.home.join("config.toml")).unwrap();
    text.push_str("\n[permissions]\ndeny = [\"mcp__s__p*\"]\n");
    env.user_config(&text);
    let mut s = env.stdio(&[]);
    s.user("use them");
    let (evs, asked) = turn_answering(&mut s, true);
    assert!(asked.is_empty());
    let got = ends(&evs);
    assert_eq!(got[0], ("mcp__s__look".into(), true, "look ran".into()));
    assert_eq!(got[1].0, "mcp__s__poke");
    assert!(!got[1].1, "denied by the rule: {got:?}");
    s.finish();
}

/// The scripted server as a project server `s` (`.openmax/config.toml`), not yet approved;
/// returns the file each of its starts appends a line to.
fn project_server(env: &TestEnv) -> PathBuf {
    project_server_with(env, "")
}

/// [`project_server`] with more of the server's environment (`, NAME = "value"`).
fn project_server_with(env: &TestEnv, more_env: &str) -> PathBuf {
    // The server's script is a project file: its bytes are part of what is approved.
    let script = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/scripted_server.py"),
    )
    .unwrap();
    env.write("srv.py", &script);
    // A project server runs in the sandbox: it may write in the project. The file is given by
    // a literal variable, not in argv (a project file argv names is part of the approved bytes).
    let starts = env.project.join("starts.txt");
    env.project_config(&format!(
        "[mcp_servers.s]\ncommand = \"python3\"\nargs = [\"srv.py\"]\n\
         env = {{ STARTS_FILE = {:?}{more_env} }}\n",
        starts.display().to_string()
    ));
    starts
}

/// Run `calls` (tool-call replies, one after another) against the project server `s` (with
/// `more_env`; it runs in the sandbox), openmax run by `who`, approved in the session at the
/// first and every later approval answered yes; returns each call's name, whether it
/// succeeded and its output, and how many times the server started.
fn calls(who: Who, calls: Vec<Reply>, more_env: &str) -> (Vec<(String, bool, String)>, usize) {
    let mut env = TestEnv::new();
    let mut replies = calls;
    replies.push(text_reply("done"));
    let mock = MockServer::start(replies);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    env.trust();
    env.set_mode("ask");
    let starts = project_server_with(&env, more_env);
    env.run_as(who);
    let mut s = env.stdio(&[]);
    s.user("call it");
    let mut evs = s.until_type("approval_request");
    let req = evs.last().unwrap().clone();
    assert_eq!(req["reason"], "unapproved_source", "{req}");
    s.approve(&req["approval_id"], true);
    evs.extend(turn_answering(&mut s, true).0);
    s.finish();
    let starts = std::fs::read_to_string(starts).unwrap_or_default();
    (ends(&evs), starts.lines().count())
}

/// A project server approved in the session starts at its first call; a call of a tool it
/// turns out not to have fails naming the tools it has (the server is not asked to run it),
/// at that first call and at a later one.
#[test]
fn a_server_approved_in_session_starts_at_its_first_call_and_a_tool_it_lacks_fails_by_name() {
    let (ends, starts) = calls(
        Who::Me,
        vec![
            call("c1", "nothere"),
            call("c2", "look"),
            call("c3", "gone"),
        ],
        "",
    );
    let (name, ok, out) = &ends[0];
    assert_eq!(name, "mcp__s__nothere");
    assert!(!ok, "{out}");
    assert!(
        out.contains("MCP server s started; it has no tool \"nothere\"; its tools: look, poke"),
        "{out}"
    );
    assert_eq!(ends[1], ("mcp__s__look".into(), true, "look ran".into()));
    let (name, ok, out) = &ends[2];
    assert_eq!(name, "mcp__s__gone");
    assert!(!ok, "{out}");
    assert!(
        out.contains("MCP server s has no tool \"gone\"; its tools: look, poke"),
        "{out}"
    );
    assert_eq!(starts, 1, "started once, at the first call");
}

/// A project server started by a call is restarted once when it dies, as a user's server is,
/// and not again until `reload`.
#[test]
fn a_call_started_server_that_dies_is_restarted_once() {
    let (ends, starts) = calls(
        Who::Me,
        ["look", "crash", "look", "crash", "look"]
            .iter()
            .enumerate()
            .map(|(i, t)| call(&format!("c{i}"), t))
            .collect(),
        "",
    );
    let oks: Vec<bool> = ends.iter().map(|(_, ok, _)| *ok).collect();
    assert_eq!(oks, [true, false, true, false, false], "{ends:?}");
    assert!(
        ends[4].2.contains("already restarted once"),
        "{}",
        ends[4].2
    );
    assert_eq!(starts, 2, "started at the first call, restarted once");
}

/// `mcp__s__read_resource` (`uri` `note://a`, then `note://b`) as the first two calls, openmax
/// run by `who`: returns each one's success and output, and how many times the server started.
fn read_resource_twice(who: Who, more_env: &str) -> (Vec<(bool, String)>, usize) {
    let read = |id: &str, uri: &str| tool_reply(id, "mcp__s__read_resource", json!({"uri": uri}));
    let reads = vec![read("c1", "note://a"), read("c2", "note://b")];
    let (ends, starts) = calls(who, reads, more_env);
    let got = ends
        .into_iter()
        .map(|(name, ok, out)| {
            assert_eq!(name, "mcp__s__read_resource");
            (ok, out)
        })
        .collect();
    (got, starts)
}

/// `read_resource` is openmax's own tool, not one in a server's list: on a project server
/// approved in the session, the call that starts it and every later one are a
/// `resources/read`, not a call of a tool of that name the server does not have.
#[test]
fn a_read_resource_that_starts_a_server_reads_the_resource() {
    for who in runners() {
        let w = who.label();
        let (got, starts) = read_resource_twice(who, "");
        for ((ok, out), uri) in got.iter().zip(["note://a", "note://b"]) {
            assert!(ok, "{w}: {out}");
            assert!(out.contains(&format!("[resource {uri}")), "{w}: {out}");
            assert!(out.contains(&format!("the text of {uri}")), "{w}: {out}");
        }
        assert_eq!(starts, 1, "{w}: started once, at the first call");
    }
}

/// A server with a `read_resource` tool of its own keeps it, as in the tool set: the call that
/// starts it, and every later one, is a call of that tool.
#[test]
fn a_servers_own_read_resource_stands_when_a_call_starts_it() {
    for who in runners() {
        let w = who.label();
        let (got, starts) = read_resource_twice(who, ", EXTRA_TOOL = \"read_resource\"");
        for (ok, out) in &got {
            assert!(ok, "{w}: {out}");
            assert_eq!(out, "read_resource ran", "{w}");
        }
        assert_eq!(starts, 1, "{w}: started once, at the first call");
    }
}

#[test]
fn a_project_config_server_starts_only_once_approved_with_openmax_approve() {
    let env = TestEnv::new();
    let mock = MockServer::start(vec![
        call("c1", "look"),
        text_reply("declined"),
        call("c2", "look"),
        text_reply("looked"),
    ]);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    env.trust();
    env.set_mode("ask");
    let starts = project_server(&env);
    let started = || {
        std::fs::read_to_string(&starts)
            .unwrap_or_default()
            .lines()
            .count()
    };

    let mut s = env.stdio(&[]);
    s.user("look");
    let mut evs = s.until_type("approval_request");
    let req = evs.last().unwrap().clone();
    assert_eq!(req["reason"], "unapproved_source", "{req}");
    assert_eq!(req["source_path"], ".openmax/config.toml");
    assert_eq!(started(), 0, "not started before a human approved it");
    s.approve(&req["approval_id"], false);
    evs.extend(s.turn().0);
    assert!(!ends(&evs)[0].1, "declined: {evs:?}");
    s.finish();
    assert_eq!(started(), 0);

    let out = env.run_on_tty(&["--approve", ".openmax/config.toml"]);
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    let mut s = env.stdio(&[]);
    s.user("look again");
    let (evs, asked) = turn_answering(&mut s, false);
    assert_eq!(started(), 1, "approved: started at freeze");
    assert!(
        asked.is_empty(),
        "approved, and read-only in ask: {asked:?}"
    );
    assert_eq!(
        ends(&evs)[0],
        ("mcp__s__look".into(), true, "look ran".into())
    );
    s.finish();
}

#[test]
fn a_call_past_tool_timeout_s_fails_naming_the_timeout_and_is_cancelled_at_the_server() {
    let (env, _mock, _) = setup(vec![call("c1", "hang"), text_reply("gave up")], "auto");
    let mut text = std::fs::read_to_string(env.home.join("config.toml")).unwrap();
    text.push_str("tool_timeout_s = 0.5\n");
    env.user_config(&text);
    let mut s = env.stdio(&[]);
    s.user("hang");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "end_turn", "{evs:?}");
    let got = ends(&evs);
    assert!(!got[0].1);
    assert!(
        got[0].2.contains("timed out after 500 ms (tool_timeout_s)"),
        "{}",
        got[0].2
    );
    let log = || -> String {
        std::fs::read_dir(env.home.join("projects"))
            .unwrap()
            .flatten()
            .filter_map(|p| std::fs::read_dir(p.path().join("sessions")).ok())
            .flat_map(|d| d.flatten())
            .filter(|e| e.path().to_string_lossy().ends_with(".mcp.log"))
            .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
            .collect()
    };
    let end = std::time::Instant::now() + DEADLINE;
    while !log().contains("cancelled request") {
        assert!(
            std::time::Instant::now() < end,
            "no notifications/cancelled: {}",
            log()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(log().contains("timed out after 500 ms"), "{}", log());
    s.finish();
}
