//! `reload` through the real binary: the prompt is re-read, the receipt says what changed and
//! who changed it, and the next request carries the new prompt.

use openmax_tests::*;
use serde_json::json;

#[test]
fn reload_reports_prompt_changes_by_outside_and_by_agent() {
    let env = TestEnv::new();
    let mock = MockServer::start(vec![
        text_reply("first"),
        tool_reply(
            "w",
            "write_file",
            json!({"path":"AGENTS.md","content":"Use tabs.\n"}),
        ),
        text_reply("done"),
    ]);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    env.trust();
    let mut s = env.stdio(&[]);
    s.send(json!({"cmd":"approval_mode","mode":"auto"}));
    assert_eq!(s.event()["type"], "approval_mode");

    // Someone else writes the project's AGENTS.md.
    std::fs::write(env.project.join("AGENTS.md"), "Prefer small commits.\n").unwrap();
    s.send(json!({"cmd":"reload"}));
    let evs = s.until_type("refrozen");
    let changes = &evs.last().unwrap()["changes"];
    assert_eq!(
        changes,
        &json!([{"kind":"prompt","name":"project AGENTS.md","change":"added","path":"AGENTS.md","by":"outside"}])
    );
    s.user("hi");
    s.turn();
    let body = mock.requests()[0].body.to_string();
    assert!(body.contains("Prefer small commits."), "new prompt sent");

    // This session's agent rewrites it.
    s.user("change the rules");
    s.turn();
    s.send(json!({"cmd":"reload"}));
    let evs = s.until_type("refrozen");
    let changes = &evs.last().unwrap()["changes"];
    assert_eq!(changes[0]["change"], "changed");
    assert_eq!(changes[0]["by"], "agent");
    assert_eq!(s.finish().0, Some(0));
}
