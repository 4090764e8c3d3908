//! End to end: the ACP client's `fs` capability. With `fs.readTextFile` / `fs.writeTextFile`
//! offered by the real `@agentclientprotocol/sdk` client (`tests/acp/client.mjs`), `read_file`,
//! `write_file` and `edit_file` see and change the client's buffers; paths are confined and
//! approvals asked by openmax before the client is.

use openmax_tests::acp::*;
use openmax_tests::*;
use serde_json::{json, Value};

fn fs_calls<'a>(lines: &'a [Value], kind: &str) -> Vec<&'a Value> {
    lines.iter().filter_map(|l| l.get(kind)).collect()
}

/// The canonical absolute path of `rel` in the project (what openmax sends the client).
fn abs(env: &TestEnv, rel: &str) -> String {
    std::fs::canonicalize(&env.project)
        .unwrap()
        .join(rel)
        .display()
        .to_string()
}

#[test]
fn read_file_sees_the_clients_unsaved_buffer() {
    let (env, mock) = setup(vec![
        tool_reply("c1", "read_file", json!({"path": "a.txt"})),
        text_reply("read"),
    ]);
    std::fs::write(env.project.join("a.txt"), "on disk\n").unwrap();
    let path = abs(&env, "a.txt");
    let lines = client(
        &env,
        json!({"fs": {"read": true, "write": true, "buffers": {&path: "in the editor\n"}},
               "steps": [{"op": "new"}, {"op": "prompt", "text": "read a.txt"}]}),
    );
    let reads = fs_calls(&lines, "fs_read");
    assert_eq!(reads.len(), 1, "{lines:#?}");
    assert_eq!(reads[0]["path"], path.as_str());
    let sent = mock.requests()[1].body.to_string();
    assert!(sent.contains("in the editor"), "{sent}");
    assert!(!sent.contains("on disk"), "{sent}");
    assert_eq!(
        answers(&lines),
        vec![&json!({"response": {"stopReason": "end_turn"}})]
    );
}

#[test]
fn an_allowed_write_goes_to_the_client_with_the_buffers_diff() {
    let (env, _mock) = setup(vec![
        tool_reply(
            "c1",
            "edit_file",
            json!({"path": "a.txt", "old_string": "editor", "new_string": "model"}),
        ),
        tool_reply(
            "c2",
            "write_file",
            json!({"path": "new.txt", "content": "fresh\n"}),
        ),
        text_reply("done"),
    ]);
    std::fs::write(env.project.join("a.txt"), "on disk\n").unwrap();
    let path = abs(&env, "a.txt");
    let lines = client(
        &env,
        json!({"permission": "allow",
               "fs": {"read": true, "write": true, "buffers": {&path: "in the editor\n"}},
               "steps": [{"op": "new"}, {"op": "prompt", "text": "edit"}]}),
    );
    let writes = fs_calls(&lines, "fs_write");
    assert_eq!(writes.len(), 2, "{lines:#?}");
    assert_eq!(writes[0]["path"], path.as_str());
    assert_eq!(writes[0]["content"], "in the model\n");
    assert_eq!(writes[1]["path"], abs(&env, "new.txt").as_str());
    assert_eq!(writes[1]["content"], "fresh\n");
    // The client holds the text; openmax wrote nothing to disk itself.
    assert_eq!(
        std::fs::read_to_string(env.project.join("a.txt")).unwrap(),
        "on disk\n"
    );
    assert!(!env.project.join("new.txt").exists());
    let diff = updates(&lines, "tool_call_update")
        .iter()
        .flat_map(|u| u["content"].as_array().cloned().unwrap_or_default())
        .find(|c| c["type"] == "diff")
        .expect("a diff block");
    assert!(
        diff["newText"].as_str().unwrap().contains("in the model"),
        "{lines:#?}"
    );
    assert!(diff["oldText"].as_str().unwrap().contains("in the editor"));
    let ends: Vec<&Value> = updates(&lines, "tool_call_update")
        .into_iter()
        .filter(|u| u.get("status").is_some_and(|s| s != "in_progress"))
        .collect();
    assert!(ends.iter().all(|u| u["status"] == "completed"), "{ends:#?}");
    assert_eq!(
        answers(&lines),
        vec![&json!({"response": {"stopReason": "end_turn"}})]
    );
}

#[test]
fn a_rejected_write_and_an_escaping_path_never_reach_the_client() {
    let (env, _mock) = setup(vec![
        tool_reply("c1", "write_file", json!({"path": "a.txt", "content": "x"})),
        tool_reply("c2", "read_file", json!({"path": "../outside.txt"})),
        tool_reply("c3", "read_file", json!({"path": "/etc/passwd"})),
        text_reply("done"),
    ]);
    std::fs::write(env.root.join("outside.txt"), "secret\n").unwrap();
    let lines = client(
        &env,
        json!({"permission": "reject", "fs": {"read": true, "write": true},
               "steps": [{"op": "new"}, {"op": "prompt", "text": "try"}]}),
    );
    assert!(lines.iter().any(|l| l.get("permission").is_some()));
    assert!(fs_calls(&lines, "fs_write").is_empty(), "{lines:#?}");
    assert!(fs_calls(&lines, "fs_read").is_empty(), "{lines:#?}");
    let failed = updates(&lines, "tool_call_update")
        .iter()
        .filter(|u| u["status"] == "failed")
        .count();
    assert_eq!(failed, 3, "{lines:#?}");
    assert!(!env.project.join("a.txt").exists());
    assert_eq!(
        answers(&lines),
        vec![&json!({"response": {"stopReason": "end_turn"}})]
    );
}

#[test]
fn without_the_capability_the_file_tools_use_the_disk() {
    let (env, mock) = setup(vec![
        tool_reply("c1", "read_file", json!({"path": "a.txt"})),
        text_reply("read"),
    ]);
    std::fs::write(env.project.join("a.txt"), "on disk\n").unwrap();
    let lines = client(
        &env,
        json!({"steps": [{"op": "new"}, {"op": "prompt", "text": "read"}]}),
    );
    assert!(fs_calls(&lines, "fs_read").is_empty(), "{lines:#?}");
    assert!(mock.requests()[1].body.to_string().contains("on disk"));
}

#[test]
fn a_client_error_is_the_tools_failure_with_the_reason() {
    let (env, mock) = setup(vec![
        tool_reply("c1", "read_file", json!({"path": "a.txt"})),
        tool_reply(
            "c2",
            "write_file",
            json!({"path": "b.txt", "content": "x\n"}),
        ),
        text_reply("done"),
    ]);
    std::fs::write(env.project.join("a.txt"), "on disk\n").unwrap();
    let lines = client(
        &env,
        json!({"permission": "allow", "fs": {"read": true, "write": true, "fail": true},
               "steps": [{"op": "new"}, {"op": "prompt", "text": "try"}]}),
    );
    assert_eq!(fs_calls(&lines, "fs_read").len(), 1, "{lines:#?}");
    assert_eq!(fs_calls(&lines, "fs_write").len(), 1, "{lines:#?}");
    let failed: Vec<&Value> = updates(&lines, "tool_call_update")
        .into_iter()
        .filter(|u| u["status"] == "failed")
        .collect();
    assert_eq!(failed.len(), 2, "{lines:#?}");
    let second = mock.requests()[1].body.to_string();
    assert!(
        second.contains("read_file: the client could not read a.txt"),
        "{second}"
    );
    let third = mock.requests()[2].body.to_string();
    assert!(
        third.contains("write_file: the client could not write b.txt"),
        "{third}"
    );
    assert!(!env.project.join("b.txt").exists());
    assert_eq!(
        answers(&lines),
        vec![&json!({"response": {"stopReason": "end_turn"}})]
    );
}

#[test]
fn a_client_that_never_answers_fails_the_call_at_the_tools_time_limit() {
    // The wait for the client is the call's own: `[limits] tool_timeout_s` ends it.
    let (env, mock) = setup_with(
        vec![
            tool_reply("c1", "read_file", json!({"path": "a.txt"})),
            tool_reply(
                "c2",
                "write_file",
                json!({"path": "b.txt", "content": "x\n"}),
            ),
            text_reply("done"),
        ],
        "[limits]\ntool_timeout_s = 1",
    );
    std::fs::write(env.project.join("a.txt"), "on disk\n").unwrap();
    let lines = client(
        &env,
        json!({"permission": "allow", "fs": {"read": true, "write": true, "hang": true},
               "steps": [{"op": "new"}, {"op": "prompt", "text": "try"}]}),
    );
    assert_eq!(fs_calls(&lines, "fs_read").len(), 1, "{lines:#?}");
    assert_eq!(fs_calls(&lines, "fs_write").len(), 1, "{lines:#?}");
    let failed: Vec<&Value> = updates(&lines, "tool_call_update")
        .into_iter()
        .filter(|u| u["status"] == "failed")
        .collect();
    assert_eq!(failed.len(), 2, "{lines:#?}");
    let second = mock.requests()[1].body.to_string();
    assert!(
        second.contains(
            "read_file: timed out after 1 s (the [limits] tool_timeout_s limit); the client did \
             not answer its file request in time"
        ),
        "{second}"
    );
    // The write went out: whether the client applies it later is not known, and it says so.
    let third = mock.requests()[2].body.to_string();
    assert!(
        third.contains(
            "before the client answered the write of b.txt; the client may still write it"
        ),
        "{third}"
    );
    assert!(!env.project.join("b.txt").exists());
    assert_eq!(
        answers(&lines),
        vec![&json!({"response": {"stopReason": "end_turn"}})]
    );
}
