//! End to end: "the latest session" is the one used last, not the one created last. Through
//! the real binary, `openmax sessions` lists and `--continue` (stdio and `-p`) resumes by last
//! use: a turn in an older session, and a resume without any prompt, each make it the latest.
//! And a record whose header names another session than the index says is never trusted:
//! `--resume` and `--continue` refuse it before the handshake naming both ids, write nothing,
//! and `openmax sessions repair` leaves it out of the rebuilt index without deleting it.

use openmax_tests::*;
use serde_json::Value;

fn setup() -> (TestEnv, MockServer) {
    let env = TestEnv::new();
    let mock = MockServer::start(vec![]);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    env.trust();
    (env, mock)
}

/// `openmax sessions --json`: the ids, the one used last first.
fn listed(env: &TestEnv) -> Vec<String> {
    let out = env.run(&["sessions", "--json"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    serde_json::from_str::<Vec<Value>>(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", out.stdout))
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_string())
        .collect()
}

/// The session `--continue` opens (stdio, no prompt sent).
fn continued(env: &TestEnv) -> String {
    let s = env.stdio(&["--continue"]);
    assert_eq!(s.hello["continued"], true);
    let id = s.hello["session_id"].as_str().unwrap().to_string();
    assert_eq!(s.finish().0, Some(0));
    id
}

/// A `-p` run; its session id (the newest record's).
fn prompt(env: &TestEnv, mock: &MockServer, text: &str, extra: &[&str]) {
    mock.push(text_reply("ok"));
    let mut args = vec!["-p", text];
    args.extend_from_slice(extra);
    let out = env.run(&args);
    assert_eq!(out.code, Some(0), "{args:?}: {}", out.stderr);
}

fn last_body(mock: &MockServer) -> String {
    mock.requests()
        .last()
        .map(|r| r.body.to_string())
        .unwrap_or_default()
}

#[test]
fn continue_and_the_list_follow_the_last_use_not_the_creation() {
    let (env, mock) = setup();
    prompt(&env, &mock, "the first session", &[]);
    prompt(&env, &mock, "the second session", &[]);
    let order = listed(&env);
    assert_eq!(order.len(), 2);
    let (b, a) = (order[0].clone(), order[1].clone());
    assert_eq!(continued(&env), b, "the newest, so far also the last used");

    // A turn in the older session makes it the latest.
    prompt(&env, &mock, "back to the first", &["--resume", &a]);
    assert_eq!(listed(&env), [a.clone(), b.clone()]);
    assert_eq!(continued(&env), a);
    // -p --continue too: the request carries the first session's history.
    prompt(&env, &mock, "and on", &["--continue"]);
    let body = last_body(&mock);
    assert!(
        body.contains("the first session") && !body.contains("the second session"),
        "{body}"
    );

    // A resume alone, no prompt sent, is a use.
    let s = env.stdio(&["--resume", &b]);
    assert_eq!(s.hello["session_id"], b.as_str());
    assert_eq!(s.finish().0, Some(0));
    assert_eq!(listed(&env), [b.clone(), a.clone()]);
    assert_eq!(continued(&env), b);
}

#[test]
fn a_record_naming_another_session_is_never_trusted() {
    let (env, mock) = setup();
    prompt(&env, &mock, "session one", &[]);
    prompt(&env, &mock, "session two", &[]);
    let order = listed(&env);
    let (two, one) = (order[0].clone(), order[1].clone());
    // Session one's record replaced by a copy of session two's (its header names two).
    let one_path = env.record_path(&one);
    let two_bytes = std::fs::read(env.record_path(&two)).unwrap();
    std::fs::write(&one_path, &two_bytes).unwrap();
    // Make one the latest in the index, so --continue picks it.
    prompt(&env, &mock, "two again", &["--resume", &two]);
    let index_path = one_path.parent().unwrap().join("index.json");
    let mut index: Value =
        serde_json::from_str(&std::fs::read_to_string(&index_path).unwrap()).unwrap();
    for e in index["sessions"].as_array_mut().unwrap() {
        if e["id"] == one.as_str() {
            e["updated_ms"] = Value::from(u64::MAX / 2);
        }
    }
    std::fs::write(&index_path, index.to_string()).unwrap();
    let before: Vec<Vec<u8>> = [&one, &two]
        .iter()
        .map(|id| std::fs::read(env.record_path(id)).unwrap())
        .collect();
    let requests = mock.requests().len();

    for args in [
        vec!["--stdio", "--resume", one.as_str()],
        vec!["--stdio", "--continue"],
        vec!["-p", "hello", "--continue"],
    ] {
        let out = env.run(&args);
        assert_ne!(out.code, Some(0), "{args:?}: {}", out.stderr);
        assert_eq!(out.stdout, "", "{args:?}: nothing before the handshake");
        assert!(
            out.stderr.contains(&format!("names session {two}"))
                && out.stderr.contains(&format!("the index says {one}")),
            "{args:?}: {}",
            out.stderr
        );
    }
    assert_eq!(mock.requests().len(), requests, "no request was made");
    let after: Vec<Vec<u8>> = [&one, &two]
        .iter()
        .map(|id| std::fs::read(env.record_path(id)).unwrap())
        .collect();
    assert_eq!(before, after, "neither record was written");

    // The rebuilt index leaves the impostor out and keeps its file.
    let out = env.run(&["sessions", "repair"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.contains("skipped:"), "{}", out.stdout);
    assert_eq!(listed(&env), std::slice::from_ref(&two));
    assert!(one_path.exists());
    assert_eq!(continued(&env), two);
}
