//! Crash soak through the real binary: `openmax --stdio` is killed with SIGKILL at seeded random
//! moments (while streaming, while a tool runs, while an approval waits, between turns), then
//! resumed with `--continue` each time. After every kill:
//! - the session resumes (hello `continued`, one `transcript` line, no failure before it);
//! - every assistant text the client saw finished (`message_done`) is in the transcript;
//! - every finished message and every `tool_end` output the client saw is in the body of the
//!   next model request (the model continues from the whole record).
//!
//! Knobs: `OPENMAX_SOAK_KILLS` (default 200), `OPENMAX_SOAK_SEED` (default fixed). The counts
//! are printed (run with `--nocapture` to see them).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use openmax_tests::*;
use serde_json::{json, Value};

use openmax_core::rng::SplitMix64 as Rng;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A text reply streamed in `parts` pieces, `delay_ms` apart.
fn slow_text(text: &str, parts: usize, delay_ms: u64) -> Reply {
    let step = text.len().div_ceil(parts.max(1));
    let items = text
        .as_bytes()
        .chunks(step.max(1))
        .map(|c| StreamItem::Text {
            text: String::from_utf8(c.to_vec()).expect("ASCII text"),
        })
        .collect();
    Reply::Stream {
        items,
        end: StreamEnd::Complete { finish: None },
        delay_ms,
    }
}

/// The replies of one scripted turn, served in order (then the mock's default short text).
fn scenario(rng: &mut Rng, i: u64) -> Vec<Reply> {
    let text = |k: u32| format!("reply-{i}-{k} with some words to stream");
    let delay = rng.below(3);
    match rng.below(5) {
        0 => vec![slow_text(&text(0), 4, delay)],
        1 => vec![
            tool_reply(&format!("r{i}"), "read_file", json!({"path":"facts.txt"})),
            slow_text(&text(1), 3, delay),
        ],
        2 => vec![
            tool_reply(
                &format!("s{i}"),
                "shell",
                json!({"command": format!("echo shell-out-{i}")}),
            ),
            slow_text(&text(2), 3, delay),
        ],
        3 => vec![
            tool_reply(
                &format!("w{i}"),
                "write_file",
                json!({"path": format!("out/{i}.txt"), "content": format!("written-{i}\n")}),
            ),
            slow_text(&text(3), 3, delay),
        ],
        _ => vec![
            Reply::Stream {
                items: vec![
                    StreamItem::Text {
                        text: format!("pre-{i} "),
                    },
                    StreamItem::ToolCall {
                        id: format!("a{i}"),
                        name: "read_file".into(),
                        args: json!({"path":"facts.txt","limit":1}),
                    },
                    StreamItem::ToolCall {
                        id: format!("b{i}"),
                        name: "shell".into(),
                        args: json!({"command": format!("echo both-{i}")}),
                    },
                ],
                end: StreamEnd::Complete { finish: None },
                delay_ms: delay,
            },
            slow_text(&text(4), 2, delay),
        ],
    }
}

/// Where the process was when it was killed (by the last event the client got).
fn phase(last: Option<&Value>, open_approval: bool, open_tool: bool) -> &'static str {
    if open_approval {
        return "approval";
    }
    if open_tool {
        return "tool";
    }
    match last.and_then(|e| e["type"].as_str()) {
        None | Some("transcript") | Some("hello") => "before any event",
        Some("token") | Some("thinking") => "streaming",
        Some("done") => "between turns",
        Some(_) => "turn (other)",
    }
}

/// JSON-escaped form of `s` as it appears inside a serialized body.
fn escaped(s: &str) -> String {
    let q = serde_json::to_string(s).expect("a string serializes");
    q[1..q.len() - 1].to_string()
}

#[test]
fn sigkill_soak_loses_nothing_reported_finished() {
    let kills = env_u64("OPENMAX_SOAK_KILLS", 200);
    let seed = env_u64("OPENMAX_SOAK_SEED", 0x5EED_0F0A_CAFE);
    let mut rng = Rng::new(seed);
    let started = Instant::now();

    let env = TestEnv::new();
    // A fresh mock per process keeps its request log (cloned to be read) small.
    let mut mock = MockServer::start(vec![]);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    env.trust();
    env.write("facts.txt", "fact-line-1\nfact-line-2\n");
    env.set_mode("ask");

    // Everything the client saw reported finished, over the whole soak.
    let mut done_texts: Vec<String> = Vec::new();
    let mut tool_outputs: Vec<(String, String)> = Vec::new();
    let mut by_phase: BTreeMap<&str, u64> = BTreeMap::new();
    let mut torn_notices = 0u64;
    let mut body_checks = 0u64;
    let mut approvals = 0u64;
    let mut sid = Value::Null;
    let mut flavors: BTreeMap<String, u64> = BTreeMap::new();

    for i in 0..kills {
        // Each process talks to a fresh mock, in a random provider format: the record is
        // provider-neutral and every format must carry the whole history.
        let flavor = [Flavor::Anthropic, Flavor::Openai, Flavor::OpenaiChat][rng.below(3) as usize];
        *flavors.entry(format!("{flavor:?}")).or_default() += 1;
        if i > 0 {
            mock = MockServer::start(vec![]);
        }
        env.mock_config(flavor, &mock.base_url(), "");
        let mut s = if i == 0 {
            let s = env.stdio(&[]);
            sid = s.hello["session_id"].clone();
            s
        } else {
            let mut s = env.stdio(&["--continue"]);
            assert_eq!(s.hello["continued"], true, "kill {i}: not continued");
            assert_eq!(s.hello["session_id"], sid, "kill {i}: another session");
            let t = s.event();
            assert_eq!(t["type"], "transcript", "kill {i}");
            assert_eq!(
                t["truncated"], false,
                "kill {i}: the soak stays under the caps"
            );
            let contents: Vec<&str> = t["messages"]
                .as_array()
                .expect("messages")
                .iter()
                .filter(|m| m["role"] == "assistant")
                .map(|m| m["content"].as_str().unwrap_or_default())
                .collect();
            for d in &done_texts {
                assert!(
                    contents.iter().any(|c| c == d),
                    "kill {i}: finished message {d:?} missing from the transcript {t}"
                );
            }
            s
        };

        for r in scenario(&mut rng, i) {
            mock.push(r);
        }
        // Kill after reading `stop_after` events of the turn (0: right after the command).
        let stop_after = rng.below(14);
        let requests_before = 0;
        s.user(&format!("user-{i}"));
        let mut open_approvals: Vec<Value> = Vec::new();
        let mut last: Option<Value> = None;
        let mut read = 0;
        while read < stop_after {
            // A turn that ended before the kill point idles: the kill lands between turns.
            let Some(e) = s.try_event(Duration::from_millis(
                if last.as_ref().is_some_and(|l| l["type"] == "done") {
                    0
                } else {
                    DEADLINE.as_millis() as u64
                },
            )) else {
                break;
            };
            read += 1;
            match e["type"].as_str().unwrap_or_default() {
                "approval_request" => open_approvals.push(e["approval_id"].clone()),
                "approval_settled" => open_approvals.retain(|a| *a != e["approval_id"]),
                _ => {}
            }
            last = Some(e);
            // Answer a waiting approval unless this is the kill point.
            if read < stop_after {
                if let Some(a) = open_approvals.first().cloned() {
                    s.approve(&a, rng.below(2) == 0);
                    approvals += 1;
                    open_approvals.remove(0);
                }
            }
        }
        // Most kills land a random few hundred microseconds after the event, anywhere in the
        // work that follows it (a record append, an fsync, a tool's start); some at once.
        if rng.below(4) != 0 {
            std::thread::sleep(Duration::from_micros(rng.below(3000)));
        }
        let pid = s.pid() as i32;
        let (lines, stderr) = s.kill_hard();
        // Classify by everything the client got, drained lines included.
        let turn: Vec<Value> = lines
            .iter()
            .map(|l| serde_json::from_str(l).unwrap_or(Value::Null))
            .filter(|e| !matches!(e["type"].as_str(), Some("hello") | Some("transcript")))
            .collect();
        let mut waiting = 0i64;
        let mut running = 0i64;
        for e in &turn {
            match e["type"].as_str().unwrap_or_default() {
                "approval_request" => waiting += 1,
                "approval_settled" => waiting -= 1,
                "tool_start" => running += 1,
                "tool_end" => running -= 1,
                _ => {}
            }
        }
        let ph = phase(turn.last(), waiting > 0, running > 0);
        *by_phase.entry(ph).or_default() += 1;
        assert!(wait_gone(pid), "kill {i}: the process survived SIGKILL");
        if stderr.contains("torn") {
            torn_notices += 1;
        }

        // The first request of this process carries everything finished before it.
        let reqs = mock.requests();
        if reqs.len() > requests_before {
            let body = reqs[requests_before].body.to_string();
            for d in &done_texts {
                assert!(
                    body.contains(&escaped(d)),
                    "kill {i}: finished message {d:?} missing from the next request"
                );
            }
            for (id, out) in &tool_outputs {
                assert!(
                    body.contains(&escaped(out)),
                    "kill {i}: tool_end output of {id} ({out:?}) missing from the next request"
                );
            }
            body_checks += 1;
        }

        // What the client saw finished in this process (lines drained after the kill count:
        // they were written to the client).
        for l in &lines {
            let e: Value = serde_json::from_str(l).unwrap_or(Value::Null);
            match e["type"].as_str() {
                Some("message_done") => {
                    let t = e["text"].as_str().unwrap_or_default();
                    if !t.is_empty() {
                        done_texts.push(t.to_string());
                    }
                }
                Some("tool_end") => tool_outputs.push((
                    e["call_id"].as_str().unwrap_or_default().to_string(),
                    e["output"].as_str().unwrap_or_default().to_string(),
                )),
                _ => {}
            }
        }
    }

    // A final clean resume: every finished message and tool output is still there.
    let mut s = env.stdio(&["--continue"]);
    let t = s.event();
    assert_eq!(t["type"], "transcript");
    let requests_before = mock.requests().len();
    s.user("final");
    let (_, reason) = s.turn();
    assert_eq!(reason, "end_turn");
    let (code, _, _) = s.finish();
    assert_eq!(code, Some(0));
    let body = mock.requests()[requests_before].body.to_string();
    for d in &done_texts {
        assert!(body.contains(&escaped(d)), "final: {d:?} missing");
    }
    for (id, out) in &tool_outputs {
        assert!(
            body.contains(&escaped(out)),
            "final: tool output of {id} missing"
        );
    }
    let record = env.record_path(sid.as_str().unwrap());
    let size = std::fs::metadata(&record).unwrap().len();

    println!(
        "crash soak: seed {seed:#x}, {kills} SIGKILLs in {:.1} s; kills by phase {by_phase:?}; \
         {approvals} approvals answered; {} finished messages and {} tool_end outputs checked \
         after every later resume; {body_checks} request bodies checked; {torn_notices} torn-line \
         notices; record {size} bytes; provider formats {flavors:?}",
        started.elapsed().as_secs_f64(),
        done_texts.len(),
        tool_outputs.len(),
    );
    assert!(!done_texts.is_empty() && !tool_outputs.is_empty());
    for p in ["streaming", "tool", "approval", "between turns"] {
        assert!(
            by_phase.get(p).copied().unwrap_or(0) > 0 || kills < 100,
            "no kill landed in phase {p}: {by_phase:?}"
        );
    }
}
