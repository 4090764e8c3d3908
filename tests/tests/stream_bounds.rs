//! The real `openmax --stdio` against a loopback mock that sends more than a client should
//! hold: an endless stream of 8 KB text deltas read by a slow client (the reply ends
//! `truncated` at `max_reply_bytes` and the process's peak RSS stays small, so nothing piled
//! up between the server and stdout), 5,000 tool calls in one reply (none runs), thinking past
//! its cap, and two calls with one id (the second refused with a result telling the model).
//! Every stream is checked by the validator.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use openmax_tests::*;
use serde_json::{json, Value};

fn setup(flavor: Flavor, replies: Vec<Reply>, extra_config: &str) -> (TestEnv, MockServer) {
    let env = TestEnv::new();
    let mock = MockServer::start(replies);
    env.mock_config(flavor, &mock.base_url(), "");
    if !extra_config.is_empty() {
        let path = env.home.join("config.toml");
        let mut base = std::fs::read_to_string(&path).unwrap();
        base.push_str(extra_config);
        std::fs::write(&path, base).unwrap();
    }
    env.trust();
    (env, mock)
}

fn endless(delta_bytes: usize) -> Reply {
    Reply::Stream {
        items: vec![],
        end: StreamEnd::Endless { delta_bytes },
        delay_ms: 0,
    }
}

/// The peak resident set of `pid` in KiB (`VmHWM` in `/proc/<pid>/status`).
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/<pid>/status")
}

/// An endless stream read by a client that takes its time over every line: the reply ends
/// `truncated` at the default 4 MiB cap, with the kept text as `message_done`, and the
/// process's peak RSS stays under 64 MiB.
fn endless_stream_to_a_slow_client_is_bounded(flavor: Flavor) {
    let (env, _mock) = setup(flavor, vec![endless(8 * 1024)], "");
    let mut child = env
        .command(&["--stdio"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("openmax starts");
    let pid = child.id();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        // A small buffer and a pause per line: the client reads far slower than the mock
        // writes, so the pipe to it is full most of the time.
        for line in BufReader::with_capacity(4096, stdout).lines() {
            let Ok(line) = line else { return };
            std::thread::sleep(Duration::from_millis(1));
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let mut seen = Vec::new();
    let next = |seen: &mut Vec<String>| -> Value {
        let line = rx
            .recv_timeout(Duration::from_secs(120))
            .expect("the next line");
        seen.push(line.clone());
        serde_json::from_str(&line).expect("JSON line")
    };
    assert_eq!(next(&mut seen)["type"], "hello");
    stdin
        .write_all(b"{\"cmd\":\"user\",\"text\":\"go\"}\n")
        .unwrap();
    let mut evs = Vec::new();
    loop {
        let v = next(&mut seen);
        let done = v["type"] == "done";
        evs.push(v);
        if done {
            break;
        }
    }
    // Read while the process is still alive: the figure is its own accounting.
    let peak = peak_rss_kib(pid);
    assert_eq!(evs.last().unwrap()["stop_reason"], "truncated");
    let message = find(&evs, "message_done")["text"].as_str().unwrap().len();
    assert_eq!(message, 4 << 20, "the kept text is exactly the cap");
    assert_eq!(tokens(&evs).len(), 4 << 20);
    let error = find(&evs, "error")["message"].as_str().unwrap();
    assert!(error.contains("limits.max_reply_bytes"), "{error}");
    assert!(
        peak < 64 * 1024,
        "peak RSS {peak} KiB is not under 64 MiB ({flavor:?})"
    );
    eprintln!("{flavor:?}: peak RSS {peak} KiB after a 4 MiB reply to a slow client");
    drop(stdin);
    while rx.recv_timeout(DEADLINE).is_ok_and(|l| {
        seen.push(l);
        true
    }) {}
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    assert_valid(&seen, "endless stream");
}

#[test]
fn endless_stream_to_a_slow_client_is_bounded_anthropic() {
    endless_stream_to_a_slow_client_is_bounded(Flavor::Anthropic);
}

#[test]
fn endless_stream_to_a_slow_client_is_bounded_openai() {
    endless_stream_to_a_slow_client_is_bounded(Flavor::Openai);
}

#[test]
fn endless_stream_to_a_slow_client_is_bounded_chat() {
    endless_stream_to_a_slow_client_is_bounded(Flavor::OpenaiChat);
}

/// 5,000 calls in one reply: the reply ends `truncated` at `max_tool_calls`, nothing runs.
fn five_thousand_calls_run_none(flavor: Flavor) {
    let calls: Vec<(String, Value)> = (0..5000)
        .map(|i| {
            (
                format!("call{i}"),
                json!({"path": format!("f{i}.txt"), "content": "x"}),
            )
        })
        .collect();
    let refs: Vec<(&str, &str, Value)> = calls
        .iter()
        .map(|(id, args)| (id.as_str(), "write_file", args.clone()))
        .collect();
    let (env, mock) = setup(flavor, vec![tool_calls_reply(&refs)], "");
    env.set_mode("auto");
    let mut s = env.stdio(&[]);
    s.user("write them all");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "truncated");
    assert!(
        !types(&evs).contains(&"tool_start".to_string()),
        "no call runs"
    );
    let error = find(&evs, "error")["message"].as_str().unwrap();
    assert!(error.contains("limits.max_tool_calls"), "{error}");
    assert_eq!(s.finish().0, Some(0));
    assert!(env.read("f0.txt").is_none(), "no file was written");
    assert_eq!(mock.requests().len(), 1, "no further request");
}

#[test]
fn five_thousand_calls_run_none_anthropic() {
    five_thousand_calls_run_none(Flavor::Anthropic);
}

#[test]
fn five_thousand_calls_run_none_openai() {
    five_thousand_calls_run_none(Flavor::Openai);
}

#[test]
fn five_thousand_calls_run_none_chat() {
    five_thousand_calls_run_none(Flavor::OpenaiChat);
}

/// Two calls with one id: the first runs, the second is refused with a result that tells the
/// model, and the next request pairs every call with one result.
fn duplicate_call_id_is_refused(flavor: Flavor) {
    let (env, mock) = setup(
        flavor,
        vec![
            tool_calls_reply(&[
                (
                    "same",
                    "write_file",
                    json!({"path": "a.txt", "content": "A"}),
                ),
                (
                    "same",
                    "write_file",
                    json!({"path": "b.txt", "content": "B"}),
                ),
            ]),
            text_reply("ok"),
        ],
        "",
    );
    env.set_mode("auto");
    let mut s = env.stdio(&[]);
    s.user("write two");
    let (evs, reason) = s.turn();
    assert_eq!(reason, flavor.default_finish(false));
    let ends: Vec<&Value> = evs.iter().filter(|e| e["type"] == "tool_end").collect();
    assert_eq!(ends.len(), 2, "{evs:?}");
    assert_eq!(ends[0]["call_id"], "same");
    assert_eq!(ends[0]["ok"], true);
    assert_eq!(ends[1]["call_id"], "same_dup2", "{evs:?}");
    assert_eq!(ends[1]["ok"], false);
    assert_eq!(s.finish().0, Some(0));
    assert_eq!(env.read("a.txt").as_deref(), Some("A"));
    assert!(env.read("b.txt").is_none(), "the duplicate did not run");
    let second = mock.requests()[1].body.to_string();
    assert!(second.contains("same_dup2"), "{second}");
    assert!(second.contains("call ids must be unique"), "{second}");
}

#[test]
fn duplicate_call_id_is_refused_anthropic() {
    duplicate_call_id_is_refused(Flavor::Anthropic);
}

#[test]
fn duplicate_call_id_is_refused_openai() {
    duplicate_call_id_is_refused(Flavor::Openai);
}

#[test]
fn duplicate_call_id_is_refused_chat() {
    duplicate_call_id_is_refused(Flavor::OpenaiChat);
}

/// Thinking past `max_thinking_bytes` ends the reply `truncated` with the text kept so far.
#[test]
fn thinking_past_its_cap_ends_truncated() {
    let (env, _mock) = setup(
        Flavor::Anthropic,
        vec![Reply::Stream {
            items: vec![
                StreamItem::Text {
                    text: "before ".into(),
                },
                StreamItem::Thinking {
                    text: "t".repeat(3000),
                },
                StreamItem::Text {
                    text: "never".into(),
                },
            ],
            end: StreamEnd::Complete { finish: None },
            delay_ms: 0,
        }],
        "\n[limits]\nmax_thinking_bytes = 1024\n",
    );
    let mut s = env.stdio(&[]);
    s.user("think");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "truncated");
    assert_eq!(find(&evs, "message_done")["text"], "before ");
    let error = find(&evs, "error")["message"].as_str().unwrap();
    assert!(error.contains("limits.max_thinking_bytes"), "{error}");
    assert_eq!(s.finish().0, Some(0));
}
