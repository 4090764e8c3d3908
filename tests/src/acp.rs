//! Driving `openmax --acp` with the real `@agentclientprotocol/sdk` client (npm, through
//! `tests/acp/client.mjs`) against the loopback mock, and reading what the client saw.

use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::*;

/// A trusted project whose mock serves `replies`.
pub fn setup(replies: Vec<Reply>) -> (TestEnv, MockServer) {
    setup_with(replies, "")
}

/// [`setup`] with `extra` appended to the user config's `[provider]`.
pub fn setup_with(replies: Vec<Reply>, extra: &str) -> (TestEnv, MockServer) {
    let env = TestEnv::new();
    let mock = MockServer::start(replies);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), extra);
    env.trust();
    (env, mock)
}

/// Run the SDK client with `plan`; returns what it printed, one value per line, and asserts
/// openmax exited 0 after stdin closed.
pub fn client(env: &TestEnv, plan: Value) -> Vec<Value> {
    client_within(env, plan, 60)
}

/// [`client`] with a deadline of `secs` for the whole run.
pub fn client_within(env: &TestEnv, plan: Value, secs: u32) -> Vec<Value> {
    let sdk = deps::npm_package("@agentclientprotocol/sdk")
        .join("node_modules/@agentclientprotocol/sdk/dist/v1/stable/acp.js");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("acp/client.mjs");
    let mut c = Command::new("timeout");
    c.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &env.home)
        .env("OPENMAX_HOME", &env.home)
        .current_dir(&env.project)
        .arg(secs.to_string())
        .arg("node")
        .arg(script)
        .arg(sdk)
        .arg(openmax_bin())
        .arg(&env.project)
        .arg(plan.to_string());
    for (k, v) in &env.env {
        c.env(k, v);
    }
    let child = c
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node starts");
    let out = wait_child(child);
    let lines: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(
        out.code,
        Some(0),
        "client failed\nstdout:\n{}\nstderr:\n{}",
        out.stdout,
        out.stderr
    );
    assert!(
        lines.iter().all(|l| l.get("failed").is_none()),
        "{lines:#?}\nstderr:\n{}",
        out.stderr
    );
    assert_eq!(
        lines.last(),
        Some(&json!({"exit": 0})),
        "{lines:#?}\nstderr:\n{}",
        out.stderr
    );
    lines
}

pub fn updates<'a>(lines: &'a [Value], kind: &str) -> Vec<&'a Value> {
    lines
        .iter()
        .filter(|l| l["update"]["update"]["sessionUpdate"] == kind)
        .map(|l| &l["update"]["update"])
        .collect()
}

pub fn chunk_text(lines: &[Value], kind: &str) -> String {
    updates(lines, kind)
        .iter()
        .map(|u| u["content"]["text"].as_str().unwrap_or(""))
        .collect()
}

/// The answers to prompts and set_mode, in order.
pub fn answers(lines: &[Value]) -> Vec<&Value> {
    lines
        .iter()
        .filter(|l| l.get("response").is_some() || l.get("error").is_some())
        .collect()
}

pub fn parts(text: &[&str], end: StreamEnd, delay_ms: u64) -> Reply {
    Reply::Stream {
        items: text
            .iter()
            .map(|t| StreamItem::Text {
                text: t.to_string(),
            })
            .collect(),
        end,
        delay_ms,
    }
}
