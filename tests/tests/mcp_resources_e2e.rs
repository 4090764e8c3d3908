//! MCP resources and prompts against the real `@modelcontextprotocol/server-everything`: its
//! resources are offered as `mcp__everything__read_resource` (listed in the tool's
//! description, counted in the budget like any schema) and a call reads one without asking in
//! `ask` mode; in the terminal UI an `@everything:<uri>` mention brings the resource's text
//! into the prompt and `/mcp__everything__args-prompt city=Paris` sends the server's prompt.

use std::path::Path;

use openmax_tests::deps::everything_js;
use openmax_tests::tmux::Pane;
use openmax_tests::*;
use serde_json::{json, Value};

const FEATURES: &str = "demo://resource/static/document/features.md";

fn setup(replies: Vec<Reply>) -> (TestEnv, MockServer) {
    let env = TestEnv::new();
    let mock = MockServer::start(replies);
    env.mock_config(
        Flavor::Anthropic,
        &mock.base_url(),
        &format!(
            "\n[mcp_servers.everything]\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\nstartup_timeout_s = 30\n",
            Path::new(&everything_js()).display().to_string()
        ),
    );
    env.trust();
    (env, mock)
}

fn tool<'a>(body: &'a Value, name: &str) -> &'a Value {
    body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no tool {name} offered: {}", offered_tools(body).join(", ")))
}

#[test]
fn resources_are_a_read_only_tool_listing_them_and_a_call_reads_one() {
    let (env, mock) = setup(vec![
        tool_reply(
            "c1",
            "mcp__everything__read_resource",
            json!({"uri": FEATURES}),
        ),
        text_reply("read"),
    ]);
    let mut s = env.stdio(&[]);
    s.user("what can it do?");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "end_turn", "{evs:?}");
    assert!(
        !evs.iter().any(|e| e["type"] == "approval_request"),
        "reading a resource is read-only: no approval in ask mode: {evs:?}"
    );
    let end = find(&evs, "tool_end");
    assert_eq!(end["ok"], true, "{end}");
    let out = end["output"].as_str().unwrap();
    assert!(
        out.starts_with(&format!("[resource {FEATURES} (text/markdown)]")),
        "{out}"
    );
    assert!(out.contains("# Everything Server - Features"), "{out}");
    s.finish();
    let reqs = mock.requests();
    let reader = tool(&reqs[0].body, "mcp__everything__read_resource");
    let description = reader["description"].as_str().unwrap();
    assert!(description.contains(FEATURES), "{description}");
    assert_eq!(reader["input_schema"]["required"], json!(["uri"]));
    assert!(reqs[1]
        .body
        .to_string()
        .contains("Everything Server - Features"));
}

#[test]
fn the_tui_brings_a_mentioned_resource_and_sends_an_mcp_prompt() {
    let (env, mock) = setup(vec![text_reply("summarised"), text_reply("sunny")]);
    let pane = Pane::start(&env, &[], 120, 30);
    pane.wait_text("test-model");
    pane.type_text(&format!("summarise @everything:{FEATURES}"));
    pane.keys(&["Enter"]);
    pane.wait_text("summarised");
    pane.type_text("/mcp__everything__args-prompt city=Paris");
    pane.keys(&["Enter"]);
    pane.wait_text("sunny");
    pane.type_text("/mcp__everything__args-prompt");
    pane.keys(&["Enter"]);
    pane.wait_text("needs city");
    pane.keys(&["C-d"]);
    pane.wait_exit();
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 2, "{}", pane.history());
    let first = reqs[0].body.to_string();
    assert!(
        first.contains(&format!("summarise @everything:{FEATURES}")),
        "{first}"
    );
    assert!(
        first.contains(&format!(
            "<resource server=\\\"everything\\\" uri=\\\"{FEATURES}\\\">"
        )),
        "{first}"
    );
    assert!(first.contains("# Everything Server - Features"), "{first}");
    let second = &reqs[1].body["messages"];
    let last = second.as_array().unwrap().last().unwrap();
    assert_eq!(
        last["content"][0]["text"], "What's weather in Paris?",
        "{last}"
    );
}
