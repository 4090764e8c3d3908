//! End to end, with the real `@agentclientprotocol/sdk` client: how ACP sessions are opened.
//! `session/load` with `mcpServers` connects them for the loaded session (the model is offered
//! their tools and can call them); a `session/new` refused for an untrusted project leaves no
//! session behind (no session file, no index entry, no MCP server started).

use openmax_tests::acp::*;
use openmax_tests::deps::everything_js;
use openmax_tests::*;
use serde_json::json;

/// The names of the tools offered in the mock's request `i`.
fn offered(mock: &MockServer, i: usize) -> Vec<String> {
    offered_tools(&mock.requests()[i].body)
}

#[test]
fn session_load_with_mcp_servers_connects_them_and_the_model_calls_their_tool() {
    let (env, mock) = setup(vec![
        text_reply("the first answer"),
        tool_reply(
            "c1",
            "mcp__everything__echo",
            json!({"message": "hi from the loaded session"}),
        ),
        text_reply("echoed"),
    ]);
    let first = client(
        &env,
        json!({"steps": [{"op": "new"}, {"op": "prompt", "text": "the first question"}]}),
    );
    let sid = first[1]["new"]["sessionId"].as_str().unwrap().to_string();
    assert!(
        !offered(&mock, 0).iter().any(|t| t.starts_with("mcp__")),
        "the first session had no MCP server"
    );
    let server = json!({"name": "everything", "command": "node",
                        "args": [everything_js().display().to_string(), "stdio"], "env": []});
    let second = client(
        &env,
        json!({"permission": "allow", "steps": [
            {"op": "load", "session": sid, "mcpServers": [server]},
            {"op": "prompt", "text": "echo something"}]}),
    );
    assert!(
        second.iter().any(|l| l.get("load").is_some()),
        "{second:#?}"
    );
    let tools = offered(&mock, 1);
    assert!(
        tools.contains(&"mcp__everything__echo".to_string()),
        "the loaded session offers the client's server's tools: {tools:?}"
    );
    let end = *updates(&second, "tool_call_update").last().unwrap();
    assert_eq!(end["status"], "completed", "{second:#?}");
    assert!(
        mock.requests()[2]
            .body
            .to_string()
            .contains("hi from the loaded session"),
        "the result reaches the model"
    );
    // The loaded session is the first one: its history goes on in the same record.
    assert!(mock.requests()[1]
        .body
        .to_string()
        .contains("the first question"));
    assert_eq!(
        answers(&second),
        vec![&json!({"response": {"stopReason": "end_turn"}})]
    );
}

#[test]
fn a_session_new_refused_for_an_untrusted_project_leaves_no_session_behind() {
    let env = TestEnv::new();
    let mock = MockServer::start(vec![]);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    // A server that would leave a mark if it were ever started.
    let mark = env.root.join("started");
    let script = format!("touch {:?}; exec node {:?} stdio", mark, everything_js());
    let server = json!({"name": "marker", "command": "sh", "args": ["-c", script], "env": []});
    let lines = client(
        &env,
        json!({"steps": [{"op": "new", "mcpServers": [server]}]}),
    );
    let refused = lines
        .iter()
        .find_map(|l| l.get("error"))
        .unwrap_or_else(|| panic!("session/new refused: {lines:#?}"));
    assert_eq!(refused["code"], -32000, "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("openmax --trust"),
        "{refused}"
    );
    let sessions = files_under(&env.home, |p| {
        p.extension().is_some_and(|e| e == "jsonl") || p.ends_with("index.json")
    });
    assert!(sessions.is_empty(), "a refused session left {sessions:?}");
    assert!(!mark.exists(), "a refused session started its MCP server");
    assert!(mock.requests().is_empty());
}
