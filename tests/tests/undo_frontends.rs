//! End to end: undo from the two interactive frontends. In the terminal UI (a real terminal,
//! tmux), `/undo` shows a card listing what will change and waits for `y` or `n`; in ACP (the
//! real `@agentclientprotocol/sdk` client), `/undo` is an advertised command whose prompt runs
//! no turn and answers with the report. Both tell the model at its next turn.

use openmax_tests::acp::{answers, chunk_text, client, updates};
use openmax_tests::tmux::Pane;
use openmax_tests::*;
use serde_json::json;

fn write_then_done(path: &str, content: &str) -> Vec<Reply> {
    vec![
        tool_reply(
            "c1",
            "write_file",
            json!({"path": path, "content": content}),
        ),
        text_reply("written"),
    ]
}

#[test]
fn tui_undo_shows_what_will_change_and_does_it_on_y() {
    let env = TestEnv::new();
    let mut replies = write_then_done("notes.txt", "agent's\n");
    replies.push(tool_reply("c2", "read_file", json!({"path": "notes.txt"})));
    replies.push(text_reply("read it"));
    let mock = MockServer::start(replies);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    env.trust();
    env.set_mode("auto");
    env.write("notes.txt", "mine\n");
    let pane = Pane::start(&env, &[], 100, 40);
    pane.wait_text("test-model");
    pane.type_text("write the notes");
    pane.keys(&["Enter"]);
    pane.wait_text("written");
    assert_eq!(env.read("notes.txt").as_deref(), Some("agent's\n"));
    pane.type_text("/undo");
    pane.keys(&["Enter"]);
    let card = pane.wait_text("y undo");
    assert!(card.contains("undo turn 1?"), "{card}");
    assert!(card.contains("restored  notes.txt"), "{card}");
    assert_eq!(
        env.read("notes.txt").as_deref(),
        Some("agent's\n"),
        "nothing before y"
    );
    // n keeps everything; /undo again and y does it.
    pane.type_text("n");
    pane.wait_text("undo: not done");
    assert_eq!(env.read("notes.txt").as_deref(), Some("agent's\n"));
    pane.type_text("/undo");
    pane.keys(&["Enter"]);
    pane.wait_text("y undo");
    pane.type_text("y");
    pane.wait_text("undid turn 1");
    // The model's note comes back from the core as a harness_note, just after.
    pane.wait_text("note: the human undid turn 1");
    assert_eq!(env.read("notes.txt").as_deref(), Some("mine\n"));
    pane.type_text("what changed?");
    pane.keys(&["Enter"]);
    pane.wait_text("read it");
    let body = mock.requests().pop().unwrap().body.to_string();
    assert!(
        body.contains("[openmax note] the human undid turn 1"),
        "{body}"
    );
    pane.keys(&["C-d"]);
    assert_eq!(pane.wait_exit().0, 0);
}

#[test]
fn acp_undo_is_an_advertised_command_that_runs_no_turn() {
    let env = TestEnv::new();
    let mut replies = write_then_done("notes.txt", "agent's\n");
    replies.push(text_reply("noted"));
    let mock = MockServer::start(replies);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    env.trust();
    env.write("notes.txt", "mine\n");
    let lines = client(
        &env,
        json!({"permission": "allow", "steps": [
            {"op": "new"},
            {"op": "prompt", "text": "write"},
            {"op": "prompt", "text": "/undo list"},
            {"op": "prompt", "text": "/undo"},
            {"op": "prompt", "text": "/undo 9"},
            {"op": "prompt", "text": "and now?"}
        ]}),
    );
    let advertised = updates(&lines, "available_commands_update");
    assert_eq!(
        advertised[0]["availableCommands"][0]["name"], "undo",
        "{advertised:?}"
    );
    assert_eq!(env.read("notes.txt").as_deref(), Some("mine\n"));
    let said = chunk_text(&lines, "agent_message_chunk");
    assert!(said.contains("turn 1 "), "{said}");
    assert!(
        said.contains("undid turn 1") && said.contains("restored  notes.txt"),
        "{said}"
    );
    assert!(said.contains("undo: turn 9"), "{said}");
    assert_eq!(
        answers(&lines).len(),
        5,
        "every prompt answered: {:?}",
        answers(&lines)
    );
    // Only two turns reached the model, the second told of the undo.
    let requests = mock.requests();
    let bodies: Vec<String> = requests.iter().map(|r| r.body.to_string()).collect();
    assert_eq!(bodies.len(), 3, "write, its follow-up, and the last prompt");
    assert!(
        bodies[2].contains("[openmax note] the human undid turn 1"),
        "{}",
        bodies[2]
    );
}
