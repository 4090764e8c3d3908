//! The built-in file tools' time limit and cancel through the real `openmax --stdio` against
//! the loopback mock: a `read_file` of a 4 TiB sparse file that is one line (no machine reads
//! it within the test) stops at `[limits] tool_timeout_s` or at `cancel`, and afterwards the
//! process's CPU time stops growing; `write_file`/`edit_file` refuse a file over their cap
//! and leave it as it was. Every stream is validated.

use openmax_tests::*;
use serde_json::json;

fn setup(extra: &str) -> (TestEnv, MockServer) {
    let env = TestEnv::new();
    let mock = MockServer::start(vec![]);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), extra);
    env.trust();
    env.set_mode("auto");
    (env, mock)
}

/// 8 KiB of text, then holes to 4 TiB without a newline: one line no read finishes.
fn write_endless_line(env: &TestEnv) {
    env.write("huge.txt", &"x".repeat(8192));
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(env.project.join("huge.txt"))
        .unwrap();
    f.set_len(4 << 40).unwrap();
}

#[test]
fn a_read_file_over_its_time_limit_fails_and_stops_working() {
    let (env, mock) = setup("[limits]\ntool_timeout_s = 1\n");
    write_endless_line(&env);
    mock.push(tool_reply("r", "read_file", json!({"path": "huge.txt"})));
    mock.push(text_reply("gave up"));
    let mut s = env.stdio(&[]);
    s.user("read it");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "end_turn", "{:?}", types(&evs));
    let end = find(&evs, "tool_end");
    assert_eq!(end["ok"], false, "{end}");
    assert_eq!(
        end["output"],
        "read_file: timed out after 1 s (the [limits] tool_timeout_s limit); narrow the path, \
         pattern or glob"
    );
    let idle = ticks_after_quiet(s.pid());
    eprintln!("CPU ticks after the timeout: {idle} in 3 s");
    assert!(idle <= 10, "the read kept working: {idle} ticks in 3 s");
    assert_eq!(s.finish().0, Some(0));
}

#[test]
fn cancel_during_a_long_read_file_stops_the_work() {
    let (env, mock) = setup("");
    write_endless_line(&env);
    mock.push(tool_reply("r", "read_file", json!({"path": "huge.txt"})));
    mock.push(text_reply("unused"));
    let mut s = env.stdio(&[]);
    s.user("read it");
    s.until_type("tool_start");
    let pid = s.pid();
    let took = wait_busy(pid, 50);
    s.send(json!({"cmd": "cancel"}));
    let (evs, reason) = s.turn();
    assert_eq!(reason, "cancelled", "{:?}", types(&evs));
    let out = find(&evs, "tool_end")["output"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(out.ends_with("\nread_file: cancelled"), "{out}");
    let idle = ticks_after_quiet(pid);
    eprintln!("CPU ticks: 50 in {took:?} while reading, {idle} in 3 s after cancel");
    assert!(
        idle <= 10,
        "the process kept working after cancel: {idle} ticks in 3 s"
    );
    assert_eq!(s.finish().0, Some(0));
}

#[test]
fn write_file_and_edit_file_refuse_a_file_over_their_cap_and_leave_it_whole() {
    let (env, mock) = setup("");
    write_endless_line(&env);
    mock.push(tool_calls_reply(&[
        (
            "w",
            "write_file",
            json!({"path": "huge.txt", "content": "small"}),
        ),
        (
            "e",
            "edit_file",
            json!({"path": "huge.txt", "old_string": "x", "new_string": "y"}),
        ),
    ]));
    mock.push(text_reply("ok"));
    let mut s = env.stdio(&[]);
    s.user("shrink it");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "end_turn", "{:?}", types(&evs));
    let ends: Vec<&serde_json::Value> = evs.iter().filter(|e| e["type"] == "tool_end").collect();
    assert_eq!(ends.len(), 2, "{:?}", types(&evs));
    for (end, tool) in ends.iter().zip(["write_file", "edit_file"]) {
        assert_eq!(end["ok"], false, "{end}");
        assert_eq!(
            end["output"],
            format!(
                "{tool}: huge.txt is {} bytes, over the 64 MiB this tool edits or replaces; \
                 use shell for it",
                4u64 << 40
            )
        );
    }
    let meta = std::fs::metadata(env.project.join("huge.txt")).unwrap();
    assert_eq!(meta.len(), 4 << 40);
    assert_eq!(s.finish().0, Some(0));
}
