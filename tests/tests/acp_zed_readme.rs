//! The README's Zed snippet works as written: the ACP SDK's own client (npm) spawns the
//! `agent_servers` entry exactly as the README gives it (the command `openmax` found on PATH,
//! its arguments, its `env` with only `ANTHROPIC_API_KEY`), with no config file anywhere and
//! `ANTHROPIC_BASE_URL` pointing at the loopback mock, and a prompt reaches `end_turn`.

use openmax_tests::acp::*;
use openmax_tests::*;
use serde_json::{json, Value};

/// The README's Zed `settings.json` snippet, parsed.
fn readme_snippet() -> Value {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("README.md");
    let block = readme
        .split("```json")
        .skip(1)
        .filter_map(|rest| rest.split("```").next())
        .find(|b| b.contains("agent_servers"))
        .expect("a ```json block with agent_servers in the README");
    serde_json::from_str(block).unwrap_or_else(|e| panic!("the README's snippet is JSON: {e}"))
}

#[test]
fn the_readme_zed_snippet_reaches_end_turn_with_only_an_anthropic_key() {
    let snippet = readme_snippet();
    let entry = &snippet["agent_servers"]["openmax"];
    assert_eq!(entry["command"], "openmax", "{snippet}");
    assert_eq!(entry["args"], json!(["--acp"]), "{snippet}");
    let env_keys: Vec<&String> = entry["env"].as_object().unwrap().keys().collect();
    assert_eq!(env_keys, vec!["ANTHROPIC_API_KEY"], "{snippet}");

    let mock = MockServer::start(vec![text_reply("hello from zed")]);
    let mut env = TestEnv::new();
    // `openmax` on PATH, as `cargo install --path shell` puts it.
    let bin_dir = openmax_bin().parent().unwrap().to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    env.env = vec![
        ("PATH".to_string(), path),
        ("ANTHROPIC_BASE_URL".to_string(), mock.base_url()),
    ];
    env.trust();
    assert!(!env.home.join("config.toml").exists());
    let mut agent = entry.clone();
    // The placeholder of the snippet, filled in as a user fills it in.
    agent["env"]["ANTHROPIC_API_KEY"] = json!("sk-ant-zed-e2e");
    let lines = client(
        &env,
        json!({"agent": agent, "steps": [{"op": "new"}, {"op": "prompt", "text": "hi"}]}),
    );
    assert_eq!(chunk_text(&lines, "agent_message_chunk"), "hello from zed");
    assert_eq!(
        answers(&lines),
        vec![&json!({"response": {"stopReason": "end_turn"}})]
    );
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].flavor, Some(Flavor::Anthropic));
    assert_eq!(reqs[0].body["model"], "claude-sonnet-4-5");
    assert!(reqs[0].has_api_key);
}
