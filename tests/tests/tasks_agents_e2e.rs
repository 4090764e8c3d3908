//! End to end: named agents (`.openmax/agents/<name>.md`) through the real binary. The parent
//! lists them in the `task` tool's description, a `task` call with `agent` starts a child that
//! runs as it (its instructions in the child's system prompt, only its tools offered to the
//! child's model and allowed, at most its tool rounds), an unknown name is a tool error naming
//! the known ones, and a change to an agent's file shows in `refrozen` like any prompt file.
//! Every stream of the parent is validated when its session finishes.

use openmax_tests::*;
use serde_json::{json, Value};

const REVIEWER: &str = "---\ndescription: Reviews code without changing it\ntools: read_file, grep\nmax_iterations: 2\n---\nYou are REVIEWER-7. Never write files.\n";

/// A trusted project in `auto` mode with the reviewer agent, whose mock serves `replies`.
fn setup(replies: Vec<Reply>) -> (TestEnv, MockServer) {
    let env = TestEnv::new();
    let mock = MockServer::start(replies);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    env.trust();
    env.set_mode("auto");
    env.write(".openmax/agents/reviewer.md", REVIEWER);
    (env, mock)
}

/// The names of the tools a logged Anthropic request offered.
fn offered(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|t| t["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The `task` tool's description in a logged Anthropic request.
fn task_description(body: &Value) -> String {
    body["tools"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["name"] == "task"))
        .and_then(|t| t["description"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// The system prompt of a logged Anthropic request.
fn system(body: &Value) -> String {
    match &body["system"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

fn end_of<'a>(evs: &'a [Value], id: &str) -> &'a Value {
    evs.iter()
        .find(|e| e["type"] == "tool_end" && e["call_id"] == id)
        .unwrap_or_else(|| panic!("no tool_end for {id}: {:?}", types(evs)))
}

#[test]
fn a_named_agent_narrows_the_childs_tools_and_iterations() {
    let (env, mock) = setup(vec![
        tool_reply(
            "t1",
            "task",
            json!({"description": "review", "prompt": "Review src.", "agent": "reviewer"}),
        ),
        // The child: a tool it was not given, then another call; its two rounds spent, its
        // turn ends `max_iterations` (the config allows 50).
        tool_reply("c1", "shell", json!({"command": "echo pwned > pwned.txt"})),
        tool_reply("c2", "read_file", json!({"path": "README.md"})),
        text_reply("parent done"),
    ]);
    let mut s = env.stdio(&[]);
    s.user("review it");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "end_turn", "{:?}", types(&evs));
    let end = end_of(&evs, "t1");
    let out = end["output"].as_str().unwrap();
    assert!(
        out.starts_with("task \"review\" ended max_iterations") && out.contains("2 tool calls,"),
        "{out}"
    );
    assert_eq!(s.finish().0, Some(0));
    assert!(
        !env.project.join("pwned.txt").exists(),
        "the agent ran a tool it lacks"
    );

    let reqs = mock.requests();
    assert_eq!(reqs.len(), 4, "parent, child, child, parent");
    // The parent's model sees the agent in the task tool's description.
    let listed = task_description(&reqs[0].body);
    assert!(
        listed.contains("- reviewer: Reviews code without changing it (tools: grep, read_file)"),
        "{listed}"
    );
    assert!(offered(&reqs[0].body).contains(&"shell".to_string()));
    // The child's model is offered only the agent's tools, with its instructions.
    assert_eq!(offered(&reqs[1].body), ["read_file", "grep"]);
    assert!(system(&reqs[1].body).contains("You are REVIEWER-7."));
    // Its call of a tool it lacks failed with a clear error, and nothing ran.
    let second = reqs[2].body.to_string();
    assert!(
        second.contains("does not give it `shell`")
            && second.contains("its tools: grep, read_file"),
        "{second}"
    );
}

#[test]
fn a_task_without_an_agent_offers_the_child_every_tool() {
    // The control: the same project, no agent named.
    let (env, mock) = setup(vec![
        tool_reply(
            "t1",
            "task",
            json!({"description": "look", "prompt": "Look around."}),
        ),
        text_reply("looked"),
        text_reply("parent done"),
    ]);
    let mut s = env.stdio(&[]);
    s.user("delegate");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "end_turn", "{:?}", types(&evs));
    assert_eq!(end_of(&evs, "t1")["ok"], true);
    assert_eq!(s.finish().0, Some(0));
    let reqs = mock.requests();
    let tools = offered(&reqs[1].body);
    assert!(
        tools.contains(&"shell".to_string()) && tools.contains(&"write_file".to_string()),
        "{tools:?}"
    );
    assert!(!system(&reqs[1].body).contains("REVIEWER-7"));
}

#[test]
fn an_unknown_agent_is_a_tool_error_naming_the_known_ones() {
    let (env, mock) = setup(vec![
        tool_reply(
            "t1",
            "task",
            json!({"description": "review", "prompt": "Review.", "agent": "auditor"}),
        ),
        text_reply("no such agent"),
    ]);
    // A broken agent file beside the good one is a note, and the good one still loads.
    env.write(".openmax/agents/broken.md", "no front matter here");
    let mut s = env.stdio(&[]);
    s.user("review it");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "end_turn", "{:?}", types(&evs));
    let end = end_of(&evs, "t1");
    assert_eq!(end["ok"], false, "{end}");
    assert!(
        end["output"]
            .as_str()
            .unwrap()
            .contains("no agent named \"auditor\"; known agents: reviewer"),
        "{end}"
    );
    let (code, _, stderr) = s.finish();
    assert_eq!(code, Some(0));
    assert!(
        stderr.contains(".openmax/agents/broken.md: missing front matter"),
        "{stderr}"
    );
    assert_eq!(mock.requests().len(), 2, "no child was started");
}

#[test]
fn a_named_project_agent_whose_file_changes_shows_in_refrozen() {
    let (env, _mock) = setup(vec![]);
    let mut s = env.stdio(&[]);
    s.send(json!({"cmd": "reload"}));
    let evs = s.until_type("refrozen");
    assert_eq!(evs.last().unwrap()["changes"], json!([]));
    env.write(
        ".openmax/agents/reviewer.md",
        &REVIEWER.replace("REVIEWER-7", "REVIEWER-8"),
    );
    env.write(
        ".openmax/agents/fixer.md",
        "---\ndescription: Fixes things\n---\nFix it.\n",
    );
    s.send(json!({"cmd": "reload"}));
    let evs = s.until_type("refrozen");
    assert_eq!(
        evs.last().unwrap()["changes"],
        json!([
            {"kind":"prompt","name":"agent fixer","change":"added","path":".openmax/agents/fixer.md","by":"outside"},
            {"kind":"prompt","name":"agent reviewer","change":"changed","path":".openmax/agents/reviewer.md","by":"outside"}
        ])
    );
    assert_eq!(s.finish().0, Some(0));
}
