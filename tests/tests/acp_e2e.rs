//! End to end: the real `@agentclientprotocol/sdk` client (npm, driven by `tests/acp/client.mjs`)
//! spawns `openmax --acp` against the loopback mock: prompts and their chunks, permissions,
//! cancel, a cut stream, modes and session/load.

use std::process::Stdio;

use openmax_tests::acp::*;
use openmax_tests::deps::{everything_js, HttpServer};
use openmax_tests::*;
use serde_json::{json, Value};

#[test]
fn a_prompt_streams_its_chunks_in_order_and_ends_the_turn() {
    let (env, _mock) = setup(vec![parts(
        &["Hel", "lo, ", "wor", "ld"],
        StreamEnd::Complete { finish: None },
        0,
    )]);
    let lines = client(
        &env,
        json!({"steps": [{"op": "new"}, {"op": "prompt", "text": "hi"}]}),
    );
    let init = &lines[0]["initialize"];
    assert_eq!(init["protocolVersion"], 1);
    assert_eq!(init["agentCapabilities"]["loadSession"], true);
    assert_eq!(
        init["agentCapabilities"]["promptCapabilities"]["embeddedContext"],
        true
    );
    assert_eq!(init["agentCapabilities"]["mcpCapabilities"]["http"], true);
    assert_eq!(init["authMethods"], json!([]), "{init}");
    assert_eq!(init["agentInfo"]["name"], "openmax");
    assert_eq!(init["agentInfo"]["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(
        lines[1]["new"]["modes"]["currentModeId"], "ask",
        "{lines:#?}"
    );
    assert_eq!(chunk_text(&lines, "agent_message_chunk"), "Hello, world");
    assert_eq!(
        answers(&lines),
        vec![&json!({"response": {"stopReason": "end_turn"}})]
    );
}

fn write_then_done() -> Vec<Reply> {
    vec![
        tool_reply(
            "c1",
            "write_file",
            json!({"path": "notes.txt", "content": "hello\n"}),
        ),
        text_reply("written"),
    ]
}

#[test]
fn an_allowed_write_shows_its_diff_and_completes() {
    let (env, _mock) = setup(write_then_done());
    let lines = client(
        &env,
        json!({"permission": "allow", "steps": [{"op": "new"}, {"op": "prompt", "text": "write"}]}),
    );
    let ask = lines
        .iter()
        .find_map(|l| l.get("permission"))
        .expect("a permission request");
    assert_eq!(ask["toolCall"]["toolCallId"], "c1");
    assert_eq!(ask["options"][0]["optionId"], "allow");
    let call_updates = updates(&lines, "tool_call_update");
    let diff = call_updates
        .iter()
        .flat_map(|u| u["content"].as_array().cloned().unwrap_or_default())
        .find(|c| c["type"] == "diff")
        .expect("a diff block");
    assert_eq!(diff["newText"], "hello\n");
    assert_eq!(diff["oldText"], Value::Null);
    assert!(diff["path"].as_str().unwrap().ends_with("/notes.txt"));
    assert_eq!(call_updates.last().unwrap()["status"], "completed");
    assert_eq!(
        std::fs::read_to_string(env.project.join("notes.txt")).unwrap(),
        "hello\n"
    );
    assert_eq!(
        answers(&lines),
        vec![&json!({"response": {"stopReason": "end_turn"}})]
    );
}

#[test]
fn a_rejected_write_fails_and_writes_nothing() {
    let (env, _mock) = setup(write_then_done());
    let lines = client(
        &env,
        json!({"permission": "reject", "steps": [{"op": "new"}, {"op": "prompt", "text": "write"}]}),
    );
    assert!(lines.iter().any(|l| l.get("permission").is_some()));
    let call_updates = updates(&lines, "tool_call_update");
    assert_eq!(call_updates.last().unwrap()["status"], "failed");
    assert!(!env.project.join("notes.txt").exists());
    assert_eq!(
        answers(&lines),
        vec![&json!({"response": {"stopReason": "end_turn"}})]
    );
}

#[test]
fn a_cancel_mid_stream_answers_cancelled() {
    let slow: Vec<String> = (0..60).map(|i| format!("w{i} ")).collect();
    let slow: Vec<&str> = slow.iter().map(String::as_str).collect();
    let (env, _mock) = setup(vec![parts(&slow, StreamEnd::Complete { finish: None }, 50)]);
    let lines = client(
        &env,
        json!({"steps": [{"op": "new"}, {"op": "prompt", "text": "go", "cancel_after": 2}]}),
    );
    assert_eq!(
        answers(&lines),
        vec![&json!({"response": {"stopReason": "cancelled"}})]
    );
    assert!(updates(&lines, "agent_message_chunk").len() < 60);
}

#[test]
fn a_stream_cut_mid_answer_gets_exactly_one_error_answer() {
    let (env, _mock) = setup(vec![parts(&["partial ", "answ"], StreamEnd::Abort, 0)]);
    let lines = client(
        &env,
        json!({"steps": [{"op": "new"}, {"op": "prompt", "text": "go"}]}),
    );
    let a = answers(&lines);
    assert_eq!(a.len(), 1, "{lines:#?}");
    assert!(a[0].get("error").is_some(), "{lines:#?}");
    assert!(!a[0]["error"]["message"].as_str().unwrap().is_empty());
    assert!(chunk_text(&lines, "agent_message_chunk").starts_with("partial "));
}

#[test]
fn set_mode_readonly_is_saved_for_a_later_stdio_session() {
    let (env, mock) = setup(vec![]);
    let lines = client(
        &env,
        json!({"steps": [{"op": "new"}, {"op": "set_mode", "mode": "readonly"},
                         {"op": "set_mode", "mode": "yolo"}]}),
    );
    // Past the session's updates (its available commands), the answers in order.
    let answered: Vec<&Value> = lines.iter().filter(|l| l.get("update").is_none()).collect();
    assert_eq!(answered[2], &json!({"set_mode": {}}), "{lines:#?}");
    let refused = lines
        .iter()
        .find_map(|l| l.get("error"))
        .expect("yolo refused");
    assert_eq!(refused["code"], -32602, "{lines:#?}");
    assert!(refused["message"]
        .as_str()
        .unwrap()
        .contains("auto, ask, readonly"));
    // A later --stdio session is readonly: a write is refused without an approval request.
    mock.push(tool_reply(
        "c1",
        "write_file",
        json!({"path": "x.txt", "content": "x"}),
    ));
    mock.push(text_reply("ok"));
    let mut s = env.stdio(&[]);
    s.user("write");
    let (evs, _) = s.turn();
    assert!(!types(&evs).contains(&"approval_request".to_string()));
    assert_eq!(find(&evs, "tool_end")["ok"], false);
    assert!(!env.project.join("x.txt").exists());
    s.finish();
}

#[test]
fn session_load_replays_the_previous_messages_before_answering() {
    let (env, _mock) = setup(vec![text_reply("the first answer")]);
    let first = client(
        &env,
        json!({"steps": [{"op": "new"}, {"op": "prompt", "text": "the first question"}]}),
    );
    let sid = first[1]["new"]["sessionId"].as_str().unwrap().to_string();
    let second = client(&env, json!({"steps": [{"op": "load", "session": sid}]}));
    let load_at = second
        .iter()
        .position(|l| l.get("load").is_some())
        .expect("load answered");
    let replay = &second[..load_at];
    assert_eq!(
        chunk_text(replay, "user_message_chunk"),
        "the first question"
    );
    assert_eq!(
        chunk_text(replay, "agent_message_chunk"),
        "the first answer"
    );
}

/// Raw JSON-RPC lines against `openmax --acp`: malformed input gets the standard codes and the
/// connection goes on; a second prompt while one runs is refused at once; EOF drains the turn
/// in flight, answers it, and exits 0.
#[test]
fn protocol_hygiene_and_eof() {
    use std::io::{BufRead, BufReader, Write};
    let words: Vec<String> = (0..20).map(|i| format!("w{i} ")).collect();
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    let (env, _mock) = setup(vec![parts(
        &words,
        StreamEnd::Complete { finish: None },
        20,
    )]);
    let mut child = env
        .command(&["--acp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("openmax starts");
    let mut stdin = child.stdin.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(serde_json::from_str::<Value>(&l).unwrap());
        }
    });
    let mut send = |l: &str| {
        stdin.write_all(l.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    };
    let next = || rx.recv_timeout(DEADLINE).expect("an answer in time");
    send(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#);
    assert_eq!(next()["result"]["protocolVersion"], 1);
    // No auth methods: keys come from the environment; authenticate is answered all the same.
    send(r#"{"jsonrpc":"2.0","id":2,"method":"authenticate","params":{"methodId":"any"}}"#);
    assert_eq!(next(), json!({"jsonrpc":"2.0","id":2,"result":{}}));
    let cases = [
        ("{bad", Value::Null, -32700),
        ("[1,2]", Value::Null, -32600),
        (r#"{"jsonrpc":"2.0","id":3}"#, json!(3), -32600),
        (
            r#"{"jsonrpc":"2.0","id":4,"method":"nope"}"#,
            json!(4),
            -32601,
        ),
        (
            r#"{"jsonrpc":"2.0","id":5,"method":"session/prompt","params":{"prompt":3}}"#,
            json!(5),
            -32602,
        ),
        (
            r#"{"jsonrpc":"2.0","id":6,"method":"session/new","params":{"cwd":"relative","mcpServers":[]}}"#,
            json!(6),
            -32602,
        ),
    ];
    for (line, id, code) in cases {
        send(r#"{"jsonrpc":"2.0","method":"an/unknown_notification"}"#);
        send(line);
        let a = next();
        assert_eq!(
            (&a["id"], &a["error"]["code"]),
            (&id, &json!(code)),
            "{line}: {a}"
        );
    }
    let new = json!({"jsonrpc":"2.0","id":7,"method":"session/new",
                     "params":{"cwd": env.project, "mcpServers": []}});
    send(&new.to_string());
    let a = next();
    let sid = a["result"]["sessionId"]
        .as_str()
        .expect("a session")
        .to_string();
    let prompt = |id: u64| {
        json!({"jsonrpc":"2.0","id":id,"method":"session/prompt",
               "params":{"sessionId": sid, "prompt":[{"type":"text","text":"go"}]}})
        .to_string()
    };
    send(&prompt(8));
    send(&prompt(9));
    drop(stdin); // EOF while prompt 8 runs
    let mut seen = Vec::new();
    while let Ok(v) = rx.recv_timeout(DEADLINE) {
        seen.push(v);
    }
    let answers: Vec<&Value> = seen.iter().filter(|v| v.get("id").is_some()).collect();
    assert_eq!(answers.len(), 2, "{seen:#?}");
    assert_eq!(answers[0]["id"], 9);
    assert_eq!(answers[0]["error"]["code"], -32600);
    assert_eq!(answers[1]["id"], 8);
    assert_eq!(answers[1]["result"]["stopReason"], "end_turn", "{seen:#?}");
    let text: String = seen
        .iter()
        .filter_map(|v| v["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert_eq!(text, words.concat());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
}

/// 200 prompts in one connection, each meeting a fault from the mock picked by a seeded
/// generator (normal, a 503 then success, a cut after text, a stall past the idle timeout, a
/// cancel mid-stream): exactly 200 answers, each the one its fault calls for, and every message
/// chunk between two answers belongs to the prompt in flight.
#[test]
fn soak_200_prompts_with_faults() {
    #[derive(Clone, Copy, PartialEq, Debug)]
    enum Fault {
        Normal,
        Busy,
        Cut,
        Stall,
        Cancel,
    }
    let mut seed: u64 = 0x5eed_acb1;
    let mut faults = Vec::new();
    let mut replies = Vec::new();
    let mut steps = vec![json!({"op": "new"})];
    for i in 0..200 {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let fault = match (seed >> 33) % 20 {
            0..=9 => Fault::Normal,
            10..=12 => Fault::Busy,
            13..=15 => Fault::Cut,
            16 => Fault::Stall,
            _ => Fault::Cancel,
        };
        let tag = format!("p{i} ");
        let mut step = json!({"op": "prompt", "text": format!("prompt {i}")});
        match fault {
            Fault::Normal => replies.push(text_reply(&format!("{tag}ok"))),
            Fault::Busy => {
                replies.push(status(503, None, None));
                replies.push(text_reply(&format!("{tag}after 503")));
            }
            Fault::Cut => replies.push(parts(&[&tag, &tag], StreamEnd::Abort, 0)),
            Fault::Stall => replies.push(parts(&[&tag], StreamEnd::Stall, 0)),
            Fault::Cancel => {
                let many: Vec<&str> = (0..40).map(|_| tag.as_str()).collect();
                replies.push(parts(&many, StreamEnd::Complete { finish: None }, 25));
                step["cancel_after"] = json!(1);
            }
        }
        faults.push(fault);
        steps.push(step);
    }
    let (env, _mock) = setup_with(replies, "stream_idle_timeout_s = 1");
    let lines = client_within(&env, json!({"steps": steps}), 600);
    let mut prompt = 0usize;
    let mut counts = std::collections::BTreeMap::new();
    for l in &lines {
        if let Some(u) = l.get("update") {
            if u["update"]["sessionUpdate"] == "agent_message_chunk" {
                let t = u["update"]["content"]["text"].as_str().unwrap();
                assert!(
                    t.starts_with(&format!("p{prompt} ")),
                    "prompt {prompt} ({:?}) got the chunk {t:?}",
                    faults.get(prompt)
                );
            }
        } else if l.get("response").is_some() || l.get("error").is_some() {
            let fault = faults[prompt];
            let got = if l.get("error").is_some() {
                "error".to_string()
            } else {
                l["response"]["stopReason"].as_str().unwrap().to_string()
            };
            let want = match fault {
                Fault::Normal | Fault::Busy => "end_turn",
                Fault::Cut | Fault::Stall => "error",
                Fault::Cancel => "cancelled",
            };
            assert_eq!(got, want, "prompt {prompt} ({fault:?}): {l}");
            *counts.entry(format!("{fault:?}")).or_insert(0) += 1;
            prompt += 1;
        }
    }
    assert_eq!(prompt, 200, "{counts:?}");
    eprintln!("soak: {counts:?}");
}

#[test]
fn an_mcp_server_given_in_session_new_is_listed_and_its_tool_called() {
    let (env, mock) = setup(vec![
        tool_reply(
            "c1",
            "mcp__everything__echo",
            json!({"message": "hi from the client's server"}),
        ),
        text_reply("echoed"),
    ]);
    let server = json!({"name": "everything", "command": "node",
                        "args": [everything_js().display().to_string(), "stdio"], "env": []});
    let lines = client(
        &env,
        json!({"permission": "allow", "steps": [
            {"op": "new", "mcpServers": [server]},
            {"op": "prompt", "text": "echo something"}]}),
    );
    assert!(lines[1].get("new").is_some(), "{lines:#?}");
    let tools = offered_tools(&mock.requests()[0].body);
    assert!(
        tools.contains(&"mcp__everything__echo".to_string()),
        "{tools:?}"
    );
    let call = updates(&lines, "tool_call");
    assert_eq!(call[0]["toolCallId"], "c1", "{lines:#?}");
    assert_eq!(
        call[0]["rawInput"]["message"],
        "hi from the client's server"
    );
    let end = *updates(&lines, "tool_call_update").last().unwrap();
    assert_eq!(end["status"], "completed", "{lines:#?}");
    assert!(
        end["content"]
            .to_string()
            .contains("hi from the client's server"),
        "{end}"
    );
    assert!(
        mock.requests()[1]
            .body
            .to_string()
            .contains("hi from the client's server"),
        "the result reaches the model"
    );
    assert_eq!(
        answers(&lines),
        vec![&json!({"response": {"stopReason": "end_turn"}})]
    );
}

#[test]
fn an_mcp_server_that_fails_to_start_is_reported_and_the_session_goes_on() {
    let (env, _mock) = setup(vec![text_reply("still here")]);
    let server = json!({"name": "broken", "command": "/nonexistent/mcp-server",
                        "args": [], "env": []});
    let lines = client(
        &env,
        json!({"steps": [{"op": "new", "mcpServers": [server]},
                         {"op": "prompt", "text": "hi"}]}),
    );
    assert!(lines[1].get("new").is_some(), "{lines:#?}");
    let thoughts = chunk_text(&lines, "agent_thought_chunk");
    assert!(
        thoughts.contains("MCP server broken (the ACP client) did not start"),
        "{lines:#?}"
    );
    assert_eq!(chunk_text(&lines, "agent_message_chunk"), "still here");
    assert_eq!(
        answers(&lines),
        vec![&json!({"response": {"stopReason": "end_turn"}})]
    );
}

#[test]
fn a_bad_mcp_servers_entry_refuses_session_new_with_invalid_params() {
    let (env, _mock) = setup(vec![]);
    let lines = client(
        &env,
        json!({"steps": [
            {"op": "new", "mcpServers": [{"type": "sse", "name": "s", "url": "http://127.0.0.1:9/", "headers": []}]},
            {"op": "new", "mcpServers": [
                {"name": "twice", "command": "node", "args": [], "env": []},
                {"name": "twice", "command": "node", "args": [], "env": []}]},
            {"op": "new", "mcpServers": [{"type": "http", "name": "h", "url": "http://127.0.0.1:9/",
                "headers": [{"name": "Authorization", "value": "Bearer ${ANTHROPIC_API_KEY}"}]}]}]}),
    );
    let errors: Vec<&Value> = lines.iter().filter_map(|l| l.get("error")).collect();
    assert_eq!(errors.len(), 3, "{lines:#?}");
    for (e, want) in errors.iter().zip(["SSE", "given twice", "literal"]) {
        assert_eq!(e["code"], -32602, "{e}");
        assert!(e["message"].as_str().unwrap().contains(want), "{e}");
    }
    assert!(lines.iter().all(|l| l.get("new").is_none()), "{lines:#?}");
}

/// `openmax --acp` on raw lines with a session whose prompt (id 3) streams for minutes;
/// returns the child, its stdin, its stdout lines and the session id once a first chunk is out.
fn prompt_in_flight(
    env: &TestEnv,
) -> (
    std::process::Child,
    std::process::ChildStdin,
    std::sync::mpsc::Receiver<Value>,
    String,
) {
    use std::io::{BufRead, BufReader, Write};
    let mut child = env
        .command(&["--acp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("openmax starts");
    let mut stdin = child.stdin.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(serde_json::from_str::<Value>(&l).unwrap());
        }
    });
    let mut send = |v: Value| {
        stdin.write_all(v.to_string().as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    };
    let next = || rx.recv_timeout(DEADLINE).expect("an answer in time");
    send(json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}));
    assert_eq!(next()["id"], 1);
    send(json!({"jsonrpc":"2.0","id":2,"method":"session/new",
                "params":{"cwd": env.project, "mcpServers": []}}));
    let sid = next()["result"]["sessionId"].as_str().unwrap().to_string();
    send(json!({"jsonrpc":"2.0","id":3,"method":"session/prompt",
                "params":{"sessionId": sid, "prompt":[{"type":"text","text":"go"}]}}));
    loop {
        let v = next();
        if v["params"]["update"]["sessionUpdate"] == "agent_message_chunk" {
            break;
        }
    }
    (child, stdin, rx, sid)
}

/// A reply that streams for far longer than any test runs (the signal must end it).
fn endless() -> Reply {
    let words: Vec<String> = (0..100_000).map(|i| format!("w{i} ")).collect();
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    parts(&words, StreamEnd::Complete { finish: None }, 20)
}

#[test]
fn sigint_and_sigterm_cancel_the_prompt_in_flight_and_exit() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        let (env, _mock) = setup(vec![endless()]);
        let (mut child, _stdin, rx, _) = prompt_in_flight(&env);
        let pid = child.id() as i32;
        // SAFETY: kill with the child's pid and a signal number.
        assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
        let answer = loop {
            let v = rx.recv_timeout(DEADLINE).expect("the prompt is answered");
            if v.get("id").is_some() {
                break v;
            }
        };
        assert_eq!(answer["id"], 3, "signal {sig}: {answer}");
        assert_eq!(
            answer["result"]["stopReason"], "cancelled",
            "signal {sig}: {answer}"
        );
        // The process exits although the client keeps stdin open.
        let (done, exited) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = done.send(child.wait().map(|s| s.code()));
        });
        let code = exited
            .recv_timeout(DEADLINE)
            .expect("openmax exits in time");
        assert_eq!(code.unwrap(), Some(0), "signal {sig}");
    }
}

#[test]
fn an_http_mcp_server_given_in_session_new_is_called() {
    let server = HttpServer::everything();
    let (env, mock) = setup(vec![
        tool_reply("c1", "mcp__web__echo", json!({"message": "over http"})),
        text_reply("echoed"),
    ]);
    let entry = json!({"type": "http", "name": "web",
                       "url": format!("http://127.0.0.1:{}/mcp", server.port),
                       "headers": [{"name": "X-Editor", "value": "test"}]});
    let lines = client(
        &env,
        json!({"permission": "allow", "steps": [
            {"op": "new", "mcpServers": [entry]},
            {"op": "prompt", "text": "echo over http"}]}),
    );
    let end = *updates(&lines, "tool_call_update").last().unwrap();
    assert_eq!(end["status"], "completed", "{lines:#?}");
    assert!(mock.requests()[1].body.to_string().contains("over http"));
    assert_eq!(
        answers(&lines),
        vec![&json!({"response": {"stopReason": "end_turn"}})]
    );
}

#[test]
fn a_cancel_is_answered_while_another_session_still_starts_its_mcp_server() {
    use std::io::Write;
    let (env, _mock) = setup(vec![endless()]);
    let go = env.root.join("go");
    let (mut child, mut stdin, rx, sid) = prompt_in_flight(&env);
    // Session B's server waits for `go`, which the test creates only after the cancel of A was
    // answered: a loop blocked on B's start-up would never answer it.
    let script = format!(
        "while [ ! -e {go:?} ]; do sleep 0.05; done; exec node {:?} stdio",
        everything_js()
    );
    let new = json!({"jsonrpc":"2.0","id":10,"method":"session/new",
                     "params":{"cwd": env.project, "mcpServers": [
                        {"name": "slow", "command": "sh", "args": ["-c", script], "env": []}]}});
    let cancel = json!({"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId": sid}});
    for v in [new, cancel] {
        stdin.write_all(format!("{v}\n").as_bytes()).unwrap();
    }
    stdin.flush().unwrap();
    let answer = |want: u64| loop {
        let v = rx.recv_timeout(DEADLINE).expect("an answer in time");
        if v.get("id").is_some() {
            assert_eq!(v["id"], want, "{v}");
            break v;
        }
    };
    assert_eq!(answer(3)["result"]["stopReason"], "cancelled");
    std::fs::write(&go, "").unwrap();
    assert!(answer(10)["result"]["sessionId"].is_string());
    drop(stdin);
    let (done, exited) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(child.wait().map(|s| s.code()));
    });
    let code = exited
        .recv_timeout(DEADLINE)
        .expect("openmax exits in time");
    assert_eq!(code.unwrap(), Some(0));
}
