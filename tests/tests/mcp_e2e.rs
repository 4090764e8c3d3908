//! MCP servers as tool sources through the real binary and the loopback model mock, against real
//! MCP servers nobody on this project wrote (installed by `openmax_tests::deps`):
//! `@modelcontextprotocol/server-everything`, `@modelcontextprotocol/server-filesystem` and the
//! Python `mcp-server-time`.

use std::path::Path;
use std::time::{Duration, Instant};

use openmax_tests::deps;
use openmax_tests::deps::{everything_js, HttpServer};
use openmax_tests::*;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

const FILESYSTEM: &str = "@modelcontextprotocol/server-filesystem";

fn toml_str(p: &Path) -> String {
    format!("{:?}", p.display().to_string())
}

/// A user config with the mock provider and `servers` (TOML tables) appended.
fn config(env: &TestEnv, mock: &MockServer, servers: &str) {
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    let mut text = std::fs::read_to_string(env.home.join("config.toml")).unwrap();
    text.push('\n');
    text.push_str(servers);
    env.user_config(&text);
}

fn everything_server(name: &str, extra: &str) -> String {
    format!(
        "[mcp_servers.{name}]\ncommand = \"node\"\nargs = [{}, \"stdio\"]\n{extra}\n",
        toml_str(&everything_js())
    )
}

fn last_of<'a>(evs: &'a [Value], ty: &str) -> &'a Value {
    evs.iter()
        .rev()
        .find(|e| e["type"] == ty)
        .unwrap_or_else(|| panic!("no {ty} in {evs:?}"))
}

fn notes(evs: &[Value]) -> Vec<String> {
    evs.iter()
        .filter(|e| e["type"] == "harness_note")
        .map(|e| e["text"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn wait_for(path: &Path, what: &str) -> String {
    let start = Instant::now();
    loop {
        if let Ok(s) = std::fs::read_to_string(path) {
            if !s.trim().is_empty() {
                return s;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn echo_result_reaches_the_next_request_and_counts_in_the_tool_set() {
    let env = TestEnv::new();
    let mock = MockServer::start(vec![
        tool_reply(
            "c1",
            "mcp__everything__echo",
            json!({"message": "hi from mcp"}),
        ),
        text_reply("echoed"),
    ]);
    config(&env, &mock, &everything_server("everything", ""));
    env.trust();
    let mut s = env.stdio(&[]);
    s.user("echo something");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "end_turn", "{evs:?}");
    let end = last_of(&evs, "tool_end");
    assert_eq!(end["ok"], true, "{end}");
    assert!(
        end["output"].as_str().unwrap().contains("hi from mcp"),
        "{end}"
    );
    let reqs = mock.requests();
    let names = offered_tools(&reqs[0].body);
    assert!(
        names.contains(&"mcp__everything__echo".to_string()),
        "{names:?}"
    );
    assert!(
        names.contains(&"mcp__everything__get-env".to_string()),
        "{names:?}"
    );
    assert!(
        reqs[1].body.to_string().contains("hi from mcp"),
        "the result reaches the next request"
    );
    let (code, _, _) = s.finish();
    assert_eq!(code, Some(0));
}

#[test]
fn env_allow_forwards_only_the_named_variables() {
    let mut env = TestEnv::new();
    env.env.push(("MCP_A".into(), "visible-a".into()));
    env.env.push(("MCP_B".into(), "secret-b".into()));
    let mock = MockServer::start(vec![
        tool_reply("c1", "mcp__everything__get-env", json!({})),
        text_reply("done"),
    ]);
    config(
        &env,
        &mock,
        &everything_server("everything", "env_allow = [\"MCP_A\"]"),
    );
    env.trust();
    let mut s = env.stdio(&[]);
    s.user("env");
    let (evs, _) = s.turn();
    let end = last_of(&evs, "tool_end");
    let out = end["output"].as_str().unwrap();
    assert_eq!(end["ok"], true, "{end}");
    assert!(out.contains("visible-a"), "{out}");
    assert!(!out.contains("secret-b"), "B leaked: {out}");
    assert!(!out.contains("test-key"), "the provider key leaked: {out}");
    s.finish();
}

#[test]
fn cancel_sends_notifications_cancelled_to_the_server() {
    let env = TestEnv::new();
    let wire = env.root.join("server-stdin.log");
    let mock = MockServer::start(vec![
        tool_reply(
            "c1",
            "mcp__slow__trigger-long-running-operation",
            json!({"duration": 30, "steps": 30}),
        ),
        text_reply("never"),
    ]);
    // The real server, with its stdin copied to a file so the test sees what it received.
    let servers = format!(
        "[mcp_servers.slow]\ncommand = \"sh\"\nargs = [\"-c\", {}]\n",
        toml_str(Path::new(&format!(
            "tee -a '{}' | exec node '{}' stdio",
            wire.display(),
            everything_js().display()
        )))
    );
    config(&env, &mock, &servers);
    env.trust();
    let mut s = env.stdio(&[]);
    s.user("run it");
    s.until_type("tool_start");
    // The call is on the wire before the cancel.
    let start = Instant::now();
    while !std::fs::read_to_string(&wire)
        .unwrap_or_default()
        .contains("tools/call")
    {
        assert!(start.elapsed() < Duration::from_secs(30), "no tools/call");
        std::thread::sleep(Duration::from_millis(20));
    }
    s.send(json!({"cmd": "cancel"}));
    let (evs, reason) = s.turn();
    assert_eq!(reason, "cancelled", "{evs:?}");
    let start = Instant::now();
    loop {
        let seen = std::fs::read_to_string(&wire).unwrap_or_default();
        if seen.contains("notifications/cancelled") {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the server never received notifications/cancelled: {seen}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    s.finish();
}

#[test]
fn a_server_killed_mid_call_fails_the_call_and_is_restarted_once() {
    let env = TestEnv::new();
    let pidfile = env.root.join("server.pid");
    let mock = MockServer::start(vec![
        tool_reply(
            "c1",
            "mcp__victim__trigger-long-running-operation",
            json!({"duration": 60, "steps": 60}),
        ),
        text_reply("it died"),
        tool_reply("c2", "mcp__victim__echo", json!({"message": "back again"})),
        text_reply("restarted"),
    ]);
    let servers = format!(
        "[mcp_servers.victim]\ncommand = \"sh\"\nargs = [\"-c\", {}]\n",
        toml_str(Path::new(&format!(
            "echo $$ > '{}'; exec node '{}' stdio",
            pidfile.display(),
            everything_js().display()
        )))
    );
    config(&env, &mock, &servers);
    env.trust();
    let mut s = env.stdio(&[]);
    s.user("run it");
    s.until_type("tool_start");
    let pid: i32 = wait_for(&pidfile, "the server's pid")
        .trim()
        .parse()
        .unwrap();
    std::fs::remove_file(&pidfile).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    // SAFETY: a plain signal to the test's own grandchild.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    let (evs, reason) = s.turn();
    assert_eq!(reason, "end_turn", "the turn continues: {evs:?}");
    let end = last_of(&evs, "tool_end");
    assert_eq!(end["ok"], false, "{end}");
    assert!(
        end["output"]
            .as_str()
            .unwrap()
            .contains("failed during the call (the connection closed)"),
        "{end}"
    );
    s.user("again");
    let (evs, _) = s.turn();
    let end = last_of(&evs, "tool_end");
    assert_eq!(end["ok"], true, "restarted on the next call: {end}");
    assert!(end["output"].as_str().unwrap().contains("back again"));
    assert!(pidfile.exists(), "a new server process was started");
    s.finish();
}

#[test]
fn a_server_that_never_initializes_is_reported_and_the_session_works() {
    let env = TestEnv::new();
    let mock = MockServer::start(vec![
        tool_reply(
            "c1",
            "mcp__everything__echo",
            json!({"message": "still here"}),
        ),
        text_reply("fine"),
    ]);
    let servers = format!(
        "[mcp_servers.mute]\ncommand = \"sleep\"\nargs = [\"60\"]\nstartup_timeout_s = 1\n\
         enabled_tools = [\"quiet\"]\n\n{}",
        everything_server("everything", "enabled_tools = [\"echo\", \"nope\"]")
    );
    config(&env, &mock, &servers);
    env.trust();
    let begun = Instant::now();
    let mut s = env.stdio(&[]);
    s.user("hello");
    let (evs, reason) = s.turn();
    assert!(begun.elapsed() < Duration::from_secs(30));
    assert_eq!(reason, "end_turn");
    let n = notes(&evs);
    assert!(
        n.iter()
            .any(|t| t.contains("mute") && t.contains("startup timeout")),
        "{n:?}"
    );
    // A started server's list says what it offers: a name it lacks is a note; a server that
    // did not start has only its failure said.
    assert!(
        n.iter().any(|t| t.contains("MCP server everything")
            && t.contains("enabled_tools names \"nope\", which the server does not offer")),
        "{n:?}"
    );
    assert!(!n.iter().any(|t| t.contains("\"quiet\"")), "{n:?}");
    assert_eq!(last_of(&evs, "tool_end")["ok"], true);
    let (_, _, stderr) = s.finish();
    assert!(stderr.contains("mute"), "{stderr}");
}

/// The framing docs/mcp.md documents, computed independently: the definition named
/// `<file>#<server>` (the entry as compact JSON), then each project file the argv names.
fn server_sha(
    project: &Path,
    file: &str,
    server: &str,
    entry: &Value,
    argv_files: &[&str],
) -> String {
    let mut h = Sha256::new();
    let mut frame = |name: &str, bytes: &[u8]| {
        h.update(name.as_bytes());
        h.update([0]);
        h.update(bytes.len().to_string().as_bytes());
        h.update([0]);
        h.update(bytes);
    };
    frame(&format!("{file}#{server}"), entry.to_string().as_bytes());
    for f in argv_files {
        frame(f, &std::fs::read(project.join(f)).unwrap());
    }
    h.finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>()[..12]
        .to_string()
}

#[test]
fn a_project_mcp_json_server_is_gated_by_its_bytes() {
    let mut env = TestEnv::new();
    // Set: as in Claude Code, a `${VAR}` with no value and no default makes the server unusable.
    env.env.push(("PROJ_TOKEN".into(), "proj-token".into()));
    let script = format!("exec node '{}' stdio\n", everything_js().display());
    std::fs::write(env.project.join("srv.sh"), &script).unwrap();
    let entry =
        json!({"command": "sh", "args": ["srv.sh"], "env": {"PROJ_TOKEN": "${PROJ_TOKEN}"}});
    std::fs::write(
        env.project.join(".mcp.json"),
        json!({"mcpServers": {"proj": entry}}).to_string(),
    )
    .unwrap();
    let mock = MockServer::start(vec![
        tool_reply("c1", "mcp__proj__echo", json!({"message": "approved run"})),
        text_reply("ran"),
        tool_reply("c2", "mcp__proj__echo", json!({"message": "after change"})),
        text_reply("asked"),
    ]);
    config(&env, &mock, "");
    env.trust();
    let sha1 = server_sha(&env.project, ".mcp.json", "proj", &entry, &["srv.sh"]);
    let mut s = env.stdio(&[]);
    s.user("use the project server");
    let evs = s.until_type("approval_request");
    assert!(
        notes(&evs)
            .iter()
            .any(|n| n.contains("proj") && n.contains("not approved")),
        "{evs:?}"
    );
    let req = evs.last().unwrap().clone();
    assert_eq!(req["reason"], "unapproved_source");
    assert_eq!(req["source_path"], ".mcp.json");
    assert_eq!(req["source_sha"], sha1.as_str());
    assert_eq!(req["env"], json!(["PROJ_TOKEN"]));
    s.approve(&req["approval_id"], true);
    let (evs, reason) = s.turn();
    assert_eq!(reason, "end_turn");
    let end = last_of(&evs, "tool_end");
    assert_eq!(end["ok"], true, "{end}");
    assert!(end["output"].as_str().unwrap().contains("approved run"));

    // The script its argv names changes: the next call asks again, with the new sha.
    std::fs::write(env.project.join("srv.sh"), format!("# v2\n{script}")).unwrap();
    let sha2 = server_sha(&env.project, ".mcp.json", "proj", &entry, &["srv.sh"]);
    assert_ne!(sha1, sha2);
    s.user("again");
    let evs = s.until_type("approval_request");
    let req = evs.last().unwrap().clone();
    assert_eq!(req["reason"], "unapproved_source");
    assert_eq!(req["source_sha"], sha2.as_str());
    s.approve(&req["approval_id"], false);
    let (evs, _) = s.turn();
    assert_eq!(last_of(&evs, "tool_end")["ok"], false);
    s.finish();
}

#[test]
fn reload_after_adding_a_server_lists_its_tools_in_refrozen() {
    let env = TestEnv::new();
    let mock = MockServer::start(vec![
        tool_reply(
            "c1",
            "mcp__time__get_current_time",
            json!({"timezone": "UTC"}),
        ),
        text_reply("timed"),
    ]);
    config(&env, &mock, "");
    env.trust();
    let mut s = env.stdio(&[]);
    let time_bin = deps::pypi_bin_dir("mcp-server-time").join("mcp-server-time");
    let fs_bin = deps::npm_bin(FILESYSTEM, "mcp-server-filesystem");
    config(
        &env,
        &mock,
        &format!(
            "[mcp_servers.time]\ncommand = {}\nstartup_timeout_s = 60\n\n\
             [mcp_servers.fs]\ncommand = {}\nargs = [{}]\nstartup_timeout_s = 60\n",
            toml_str(&time_bin),
            toml_str(&fs_bin),
            toml_str(&env.project)
        ),
    );
    s.send(json!({"cmd": "reload"}));
    // The reload waits for both servers to start (each within its 60 s startup timeout): on a
    // loaded machine the Python server alone can take longer than the harness's line deadline.
    let r = loop {
        let e = s
            .try_event(Duration::from_secs(150))
            .expect("refrozen within the servers' startup timeouts");
        if e["type"] == "refrozen" {
            break e;
        }
    };
    let r = &r;
    let tools: Vec<&str> = r["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(tools.contains(&"mcp__time__get_current_time"), "{tools:?}");
    assert!(tools.contains(&"mcp__fs__list_directory"), "{tools:?}");
    let changes = r["changes"].as_array().unwrap();
    assert!(
        changes
            .iter()
            .any(|c| c["name"] == "mcp__time__get_current_time"
                && c["change"] == "added"
                && c["kind"] == "tool"),
        "{changes:?}"
    );
    s.user("what time is it");
    let (evs, _) = s.turn();
    let end = last_of(&evs, "tool_end");
    assert_eq!(end["ok"], true, "{end}");
    assert!(end["output"].as_str().unwrap().contains("UTC"), "{end}");
    s.finish();
}

#[test]
fn filesystem_server_reads_the_project() {
    let env = TestEnv::new();
    std::fs::write(env.project.join("notes.txt"), "filesystem server content").unwrap();
    let mock = MockServer::start(vec![
        tool_reply(
            "c1",
            "mcp__fs__read_text_file",
            json!({"path": env.project.join("notes.txt").display().to_string()}),
        ),
        text_reply("read"),
    ]);
    let fs_bin = deps::npm_bin(FILESYSTEM, "mcp-server-filesystem");
    config(
        &env,
        &mock,
        &format!(
            "[mcp_servers.fs]\ncommand = {}\nargs = [{}]\nstartup_timeout_s = 60\n",
            toml_str(&fs_bin),
            toml_str(&env.project)
        ),
    );
    env.trust();
    env.set_mode("readonly");
    let mut s = env.stdio(&[]);
    s.user("read notes");
    let (evs, _) = s.turn();
    let end = last_of(&evs, "tool_end");
    assert_eq!(
        end["ok"], true,
        "a readOnlyHint tool runs in readonly: {end}"
    );
    assert!(end["output"]
        .as_str()
        .unwrap()
        .contains("filesystem server content"));
    s.finish();
}

#[test]
fn streamable_http_server_echo_over_the_shells_own_http_stack() {
    let server = HttpServer::everything();
    let env = TestEnv::new();
    let mock = MockServer::start(vec![
        tool_reply("c1", "mcp__web__echo", json!({"message": "over http"})),
        text_reply("echoed"),
    ]);
    config(
        &env,
        &mock,
        &format!(
            "[mcp_servers.web]\nurl = \"http://127.0.0.1:{}/mcp\"\nstartup_timeout_s = 30\n",
            server.port
        ),
    );
    env.trust();
    let mut s = env.stdio(&[]);
    s.user("echo over http");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "end_turn", "{evs:?}");
    let end = last_of(&evs, "tool_end");
    assert_eq!(end["ok"], true, "{end}");
    assert!(
        end["output"].as_str().unwrap().contains("over http"),
        "{end}"
    );
    assert!(mock.requests()[1].body.to_string().contains("over http"));
    s.finish();
}

#[test]
fn a_json_answering_http_server_is_read_up_to_its_cap_and_a_larger_answer_is_a_clear_error() {
    // The official Python SDK's streamable HTTP server with JSON answers (server-everything's
    // are SSE): a 1 MiB result is read whole; one over 16 MiB fails that call, named as such,
    // and the session goes on.
    let env = TestEnv::new();
    let log = env.root.join("server.log");
    let server = HttpServer::python_sdk_json(&log);
    let mock = MockServer::start(vec![
        tool_reply("c1", "mcp__py__sized", json!({"n": 1 << 20})),
        text_reply("read"),
        tool_reply("c2", "mcp__py__sized", json!({"n": 17 << 20})),
        text_reply("refused"),
    ]);
    config(
        &env,
        &mock,
        &format!(
            "[mcp_servers.py]\nurl = \"http://127.0.0.1:{}/mcp\"\nstartup_timeout_s = 30\n",
            server.port
        ),
    );
    env.trust();
    env.set_mode("auto");
    let mut s = env.stdio(&[]);
    s.user("a megabyte");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "end_turn", "{evs:?}");
    let end = last_of(&evs, "tool_end");
    assert_eq!(end["ok"], true, "{end}");
    assert!(
        end["output"].as_str().unwrap().contains("xxxxxxxx"),
        "{end}"
    );
    s.user("seventeen megabytes");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "end_turn", "{evs:?}");
    let end = last_of(&evs, "tool_end");
    assert_eq!(end["ok"], false, "{end}");
    let out = end["output"].as_str().unwrap();
    assert!(out.contains("over 16 MiB"), "{out}");
    assert!(!out.contains("rmcp::"), "no Rust type names: {out}");
    assert!(
        out.len() < 2000,
        "the error is one short message: {} bytes",
        out.len()
    );
    s.finish();
    // Each MCP session openmax opened is ended with a DELETE when the session is over.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let (opened, deleted, text) = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let opened = text
            .matches("Created new transport with session ID")
            .count();
        let deleted = text.matches("\"DELETE /mcp HTTP/1.1\" 200").count();
        if (opened > 0 && deleted == opened) || std::time::Instant::now() > deadline {
            break (opened, deleted, text);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(
        opened > 0 && deleted == opened,
        "{opened} opened, {deleted} ended:\n{text}"
    );
}

#[test]
fn mcp_list_prints_each_server_its_state_and_tools() {
    let env = TestEnv::new();
    std::fs::write(
        env.project.join(".mcp.json"),
        r#"{"mcpServers": {"proj": {"command": "sh", "args": ["-c", "exit 3"]}}}"#,
    )
    .unwrap();
    let servers = format!(
        "{}\n[mcp_servers.broken]\ncommand = \"/nonexistent/mcp-server\"\n",
        everything_server("everything", "")
    );
    env.user_config(&servers);
    let out = env.run(&["mcp", "list"]);
    assert_eq!(
        out.code,
        Some(1),
        "a failed server fails the command: {out:?}"
    );
    let text = out.stdout;
    assert!(
        text.contains("everything (stdio,") && text.contains("started,"),
        "{text}"
    );
    assert!(text.contains("  mcp__everything__echo"), "{text}");
    assert!(
        text.contains("broken (stdio,") && text.contains("failed: could not start"),
        "{text}"
    );
    assert!(
        text.contains("proj (stdio, .mcp.json): awaiting approval"),
        "a project server is not started: {text}"
    );
    std::fs::write(
        env.home.join("config.toml"),
        everything_server("everything", ""),
    )
    .unwrap();
    std::fs::remove_file(env.project.join(".mcp.json")).unwrap();
    assert_eq!(env.run(&["mcp", "list"]).code, Some(0));
}

#[test]
fn a_server_survives_the_sweep_after_another_tools_call() {
    let env = TestEnv::new();
    let mock = MockServer::start(vec![
        tool_reply("c1", "mcp__everything__echo", json!({"message": "first"})),
        tool_reply("s1", "shell", json!({"command": "true"})),
        tool_reply("c2", "mcp__everything__echo", json!({"message": "second"})),
        tool_reply("s2", "shell", json!({"command": "true"})),
        tool_reply("c3", "mcp__everything__echo", json!({"message": "third"})),
        text_reply("done"),
    ]);
    config(&env, &mock, "");
    env.trust();
    env.set_mode("auto");
    config(&env, &mock, &everything_server("everything", ""));
    let mut s = env.stdio(&[]);
    s.user("echo, shell, echo");
    let (evs, _) = s.turn();
    let ends: Vec<&Value> = evs.iter().filter(|e| e["type"] == "tool_end").collect();
    assert_eq!(ends.len(), 5, "{evs:?}");
    for e in &ends {
        assert_eq!(e["ok"], true, "{e}");
    }
    assert!(
        ends[4]["output"].as_str().unwrap().contains("third"),
        "{:?}",
        ends[4]
    );
    s.finish();
}

/// Runs one turn, approving every request, and returns its events.
fn turn_approving_all(s: &mut Session) -> Vec<Value> {
    let mut evs = Vec::new();
    loop {
        let ev = s.event();
        evs.push(ev.clone());
        match ev["type"].as_str() {
            Some("approval_request") => s.approve(&ev["approval_id"], true),
            Some("done") => return evs,
            _ => {}
        }
    }
}

fn tool_ends(evs: &[Value]) -> Vec<&Value> {
    evs.iter().filter(|e| e["type"] == "tool_end").collect()
}

#[test]
fn a_project_server_runs_in_the_sandbox_and_a_user_server_does_not() {
    let env = TestEnv::new();
    let fs_bin = deps::npm_bin(FILESYSTEM, "mcp-server-filesystem");
    let write = |id: &str, path: &Path| {
        tool_reply(
            id,
            "mcp__fs__write_file",
            json!({"path": path.display().to_string(), "content": "written by the server"}),
        )
    };
    let inside = env.project.join("inside.txt");
    let forged = env.home.join("forged.txt");
    let mock = MockServer::start(vec![
        write("c1", &inside),
        write("c2", &forged),
        text_reply("tried both"),
        write("c3", &env.home.join("user.txt")),
        text_reply("wrote"),
    ]);
    // The project's server may write to the project and to $OPENMAX_HOME as far as the server
    // itself is concerned; only the kernel sandbox stands between it and openmax's state.
    let entry = json!({
        "command": fs_bin.display().to_string(),
        "args": [env.project.display().to_string(), env.home.display().to_string()],
    });
    std::fs::write(
        env.project.join(".mcp.json"),
        json!({"mcpServers": {"fs": entry}}).to_string(),
    )
    .unwrap();
    config(&env, &mock, "");
    env.trust();
    let mut s = env.stdio(&[]);
    s.user("write both files");
    let evs = turn_approving_all(&mut s);
    let ends = tool_ends(&evs);
    assert_eq!(ends.len(), 2, "{evs:?}");
    assert_eq!(
        ends[0]["ok"], true,
        "a write in the project works: {}",
        ends[0]
    );
    assert_eq!(
        std::fs::read_to_string(&inside).unwrap(),
        "written by the server"
    );
    assert_eq!(ends[1]["ok"], false, "{}", ends[1]);
    eprintln!(
        "the sandboxed write under $OPENMAX_HOME: {}",
        ends[1]["output"]
    );
    assert!(
        !forged.exists(),
        "a project server wrote under $OPENMAX_HOME"
    );
    s.finish();

    // The same server from the user's own config is the user's code: no sandbox.
    std::fs::remove_file(env.project.join(".mcp.json")).unwrap();
    let user_entry = format!(
        "[mcp_servers.fs]\ncommand = {}\nargs = [{}, {}]\nstartup_timeout_s = 60\n",
        toml_str(&fs_bin),
        toml_str(&env.project),
        toml_str(&env.home)
    );
    config(&env, &mock, &user_entry);
    let mut s = env.stdio(&[]);
    s.user("write as the user's server");
    let evs = turn_approving_all(&mut s);
    let ends = tool_ends(&evs);
    assert_eq!(ends.len(), 1, "{evs:?}");
    assert_eq!(ends[0]["ok"], true, "{}", ends[0]);
    assert!(env.home.join("user.txt").exists());
    s.finish();
}

#[test]
fn the_mcp_schemas_count_in_budget_and_schemas_over_budget() {
    // A window so small that the built-in schemas alone are over half of it: both sessions get
    // `schemas_over_budget`, and the MCP server's schemas make both figures larger.
    let figures = |servers: &str| -> (u64, u64) {
        let env = TestEnv::new();
        let mock = MockServer::start(vec![text_reply("hi")]);
        env.mock_config(Flavor::Anthropic, &mock.base_url(), "context_tokens = 2000");
        let mut text = std::fs::read_to_string(env.home.join("config.toml")).unwrap();
        text.push_str(servers);
        env.user_config(&text);
        env.trust();
        let mut s = env.stdio(&[]);
        s.user("hello");
        let (evs, _) = s.turn();
        s.finish();
        let over = evs
            .iter()
            .find(|e| e["type"] == "schemas_over_budget")
            .unwrap_or_else(|| panic!("no schemas_over_budget: {evs:?}"));
        let budget = last_of(&evs, "budget");
        (
            over["schema_tokens"].as_u64().unwrap(),
            budget["used_tokens"].as_u64().unwrap(),
        )
    };
    let (schemas, used) = figures("");
    let (schemas_mcp, used_mcp) = figures(&format!("\n{}", everything_server("everything", "")));
    assert!(schemas_mcp > schemas, "{schemas_mcp} vs {schemas}");
    assert!(
        used_mcp - used >= schemas_mcp - schemas,
        "budget: {used_mcp} vs {used}; schemas {schemas_mcp} vs {schemas}"
    );
}

#[test]
fn a_server_that_does_not_start_is_one_note_on_stderr_under_p() {
    let env = TestEnv::new();
    let mock = MockServer::start(vec![text_reply("fine without it")]);
    config(
        &env,
        &mock,
        "[mcp_servers.broken]\ncommand = \"/nonexistent/mcp-server\"\n",
    );
    env.trust();
    let out = env.run(&["-p", "hello"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.contains("fine without it"), "{}", out.stdout);
    assert_eq!(
        out.stderr.matches("MCP server broken").count(),
        1,
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("note: MCP server broken") && out.stderr.contains("did not start"),
        "{}",
        out.stderr
    );
}
