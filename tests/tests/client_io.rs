//! The client's side of the pipe through the real binary: a command line with a duplicate key
//! is refused (never read last-wins), and a client that closes stdout mid-turn ends the session
//! as EOF would, with the session intact on disk.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

use openmax_tests::*;
use serde_json::Value;

fn setup(replies: Vec<Reply>) -> (TestEnv, MockServer) {
    let env = TestEnv::new();
    let mock = MockServer::start(replies);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    env.trust();
    (env, mock)
}

#[test]
fn a_command_with_a_duplicate_key_is_a_protocol_error_and_runs_nothing() {
    let (env, mock) = setup(vec![text_reply("after")]);
    let mut s = env.stdio(&[]);
    // Last-wins would read `quit`; first-wins would start a turn. Neither happens.
    s.send_bytes(b"{\"cmd\":\"user\",\"text\":\"a\",\"cmd\":\"quit\"}\n");
    let pe = s.event();
    assert_eq!(pe["type"], "protocol_error", "{pe}");
    let msg = pe["message"].as_str().unwrap();
    assert!(msg.contains("\"cmd\"") && msg.contains("twice"), "{msg}");
    s.send_bytes(b"{\"cmd\":\"user\",\"text\":\"a\",\"text\":\"b\"}\n");
    assert_eq!(s.event()["type"], "protocol_error");
    assert!(mock.requests().is_empty(), "no turn started");
    // The session carries on.
    s.user("hello");
    let (events, _) = s.turn();
    assert_eq!(find(&events, "done")["stop_reason"], "end_turn");
    // `finish` validates the whole stream.
    assert_eq!(s.finish().0, Some(0));
}

#[test]
fn stdout_closed_mid_turn_ends_the_session_like_eof_and_keeps_it_intact() {
    // A reply streamed slowly enough that stdout is closed while it is still arriving.
    let items = (0..40)
        .map(|i| StreamItem::Text {
            text: format!("part{i} "),
        })
        .collect();
    let slow = Reply::Stream {
        items,
        end: StreamEnd::Complete { finish: None },
        delay_ms: 25,
    };
    let (env, _mock) = setup(vec![slow, text_reply("resumed")]);
    let mut child = env
        .command(&["--stdio"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("openmax starts");
    let mut stdin = child.stdin.take().expect("piped");
    let mut out = BufReader::new(child.stdout.take().expect("piped"));
    let mut line = String::new();
    out.read_line(&mut line).expect("hello");
    let hello: Value = serde_json::from_str(&line).expect("hello is JSON");
    let sid = hello["session_id"].as_str().unwrap().to_string();
    stdin
        .write_all(b"{\"cmd\":\"user\",\"text\":\"stream to me\"}\n")
        .unwrap();
    stdin.flush().unwrap();
    loop {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "stdout ended early");
        if line.contains("\"token\"") {
            break;
        }
    }
    // The client stops reading; stdin stays open, so only the closed stdout can end it.
    drop(out);
    let end = Instant::now() + DEADLINE;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < end,
            "openmax kept running with stdout closed"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    drop(stdin);
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("closed stdout"), "{stderr}");
    // The turn drained and was recorded: the whole reply is in the session.
    let record = std::fs::read_to_string(env.record_path(&sid)).unwrap();
    assert!(record.contains("part39"), "{record}");
    assert!(record.contains("\"rec\":\"turn_end\""), "{record}");
    let mut s = env.stdio(&["--continue"]);
    assert_eq!(s.hello["session_id"], sid.as_str());
    let t = s.event();
    assert_eq!(t["type"], "transcript");
    assert!(t.to_string().contains("part39"), "{t}");
    s.user("again");
    let (events, _) = s.turn();
    assert_eq!(find(&events, "done")["stop_reason"], "end_turn");
    assert_eq!(s.finish().0, Some(0));
}
