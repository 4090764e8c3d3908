//! `grep` through the real `openmax --stdio` against the loopback mock, on inputs a hostile
//! model or a careless project brings: a 64 MB file that is one line, a 2 GB sparse file, and
//! a search no machine finishes — after `cancel` or the `[limits] tool_timeout_s` limit, the
//! process's CPU time stops growing (read from `/proc/<pid>/stat`). Every stream is validated.

use std::time::Instant;

use openmax_tests::*;
use serde_json::{json, Value};

fn setup(extra: &str) -> (TestEnv, MockServer) {
    let env = TestEnv::new();
    let mock = MockServer::start(vec![]);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), extra);
    env.trust();
    env.set_mode("auto");
    (env, mock)
}

/// Run one turn with one `grep` call; its `tool_end`.
fn grep_once(env: &TestEnv, mock: &MockServer, args: Value) -> Value {
    mock.push(tool_reply("g", "grep", args));
    mock.push(text_reply("done"));
    let mut s = env.stdio(&[]);
    s.user("search");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "end_turn", "{:?}", types(&evs));
    assert_eq!(s.finish().0, Some(0));
    find(&evs, "tool_end").clone()
}

#[test]
fn a_64_mb_single_line_and_a_2_gb_sparse_file_get_clear_results() {
    let (env, mock) = setup("");
    let mut line = "x".repeat(32 << 20);
    line.push_str("NEEDLE");
    line.push_str(&"y".repeat(32 << 20));
    env.write("one-line.txt", &line);
    drop(line);
    let sparse = std::fs::File::create(env.project.join("sparse.bin")).unwrap();
    sparse.set_len(2 << 30).unwrap();
    let zeros = std::fs::File::create(env.project.join("zeros.bin")).unwrap();
    zeros.set_len(512 << 20).unwrap();
    env.write("small.txt", "a NEEDLE here\n");

    let t = Instant::now();
    let end = grep_once(&env, &mock, json!({"pattern": "NEEDLE"}));
    eprintln!("grep over the tree: {:?}", t.elapsed());
    assert_eq!(end["ok"], true, "{end}");
    let out = end["output"].as_str().unwrap();
    let lines: Vec<&str> = out.lines().collect();
    // The long line is shown cut, the binary files are skipped, the huge one is named.
    assert!(lines[0].starts_with("one-line.txt:1:xxxx"), "{out:.300}");
    assert!(
        lines[0].ends_with('…') && lines[0].len() < 1000,
        "{out:.300}"
    );
    assert_eq!(lines[1], "small.txt:1:a NEEDLE here");
    assert_eq!(
        lines[2],
        "[not searched (larger than the 1024 MiB file cap): sparse.bin]"
    );
    assert_eq!(lines.len(), 3, "{out:.600}");

    let end = grep_once(&env, &mock, json!({"pattern": "x", "path": "zeros.bin"}));
    assert_eq!(
        end["output"],
        "zeros.bin is a binary file (it contains NUL bytes); not searched\n"
    );
    let end = grep_once(&env, &mock, json!({"pattern": "x", "path": "sparse.bin"}));
    assert_eq!(
        end["output"],
        "no matches for \"x\" in sparse.bin\n[not searched (larger than the 1024 MiB file cap): sparse.bin]\n"
    );
    let end = grep_once(
        &env,
        &mock,
        json!({"pattern": "NEEDLE$", "path": "one-line.txt"}),
    );
    assert_eq!(
        end["output"],
        "no matches for \"NEEDLE$\" in one-line.txt\n"
    );
}

/// 64 MiB of pseudo-random `a`/`b` lines: a pattern with many overlapping candidates makes the
/// regex engine do real work per byte.
fn write_ab_file(env: &TestEnv, rel: &str) {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut text = Vec::with_capacity(64 << 20);
    while text.len() < 64 << 20 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        for bit in 0..63 {
            text.push(if (x >> bit) & 1 == 1 { b'a' } else { b'b' });
        }
        text.push(b'\n');
    }
    std::fs::write(env.project.join(rel), text).unwrap();
}

/// A search no machine finishes within the test: one 64 MiB file and 2,000 hard links to it
/// (128 GiB to search, 64 MiB on disk and in the page cache), so a cancel always lands while
/// the search runs, however fast the machine.
fn write_endless_search(env: &TestEnv) {
    write_ab_file(env, "ab0.txt");
    let dir = env.project.join("links");
    std::fs::create_dir(&dir).unwrap();
    for i in 0..2000 {
        std::fs::hard_link(env.project.join("ab0.txt"), dir.join(format!("ab{i}.txt"))).unwrap();
    }
}

/// Never matches (it needs 68 characters; every line has 63) and has no literal a prefilter
/// could skip to, while its counted repetitions blow up the lazy DFA, so the regex engine does
/// slow work on every byte and the match cap never ends the search early.
const SLOW: &str = "(a|b)*a[ab]{22}a(a|b)*b[ab]{22}b[ab]{20}$";

#[test]
fn cancel_during_a_long_grep_stops_the_work() {
    let (env, mock) = setup("");
    write_endless_search(&env);
    mock.push(tool_reply("g", "grep", json!({"pattern": SLOW})));
    mock.push(text_reply("unused"));
    let mut s = env.stdio(&[]);
    s.user("search");
    s.until_type("tool_start");
    let pid = s.pid();
    let took = wait_busy(pid, 50);
    s.send(json!({"cmd": "cancel"}));
    let (evs, reason) = s.turn();
    assert_eq!(reason, "cancelled", "{:?}", types(&evs));
    let idle = ticks_after_quiet(pid);
    eprintln!("CPU ticks: 50 in {took:?} while searching, {idle} in 3 s after cancel");
    assert!(
        idle <= 10,
        "the process kept working after cancel: {idle} ticks in 3 s"
    );
    assert_eq!(s.finish().0, Some(0));
}

#[test]
fn a_grep_over_its_time_limit_fails_and_stops_working() {
    let (env, mock) = setup("[limits]\ntool_timeout_s = 1\n");
    write_endless_search(&env);
    mock.push(tool_reply("g", "grep", json!({"pattern": SLOW})));
    mock.push(text_reply("gave up"));
    let mut s = env.stdio(&[]);
    s.user("search");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "end_turn", "{:?}", types(&evs));
    let end = find(&evs, "tool_end");
    assert_eq!(end["ok"], false, "{end}");
    let out = end["output"].as_str().unwrap();
    assert!(
        out.starts_with("grep: timed out after 1 s (the [limits] tool_timeout_s limit)"),
        "{out}"
    );
    let idle = ticks_after_quiet(s.pid());
    eprintln!("CPU ticks after the timeout: {idle} in 3 s");
    assert!(
        idle <= 10,
        "the search kept working after its timeout: {idle} ticks in 3 s"
    );
    assert_eq!(s.finish().0, Some(0));
}

#[test]
fn end_of_input_during_a_long_grep_exits_once_its_time_limit_stops_it() {
    // Without a time limit the drain would wait on this search for good.
    let (env, mock) = setup("[limits]\ntool_timeout_s = 1\n");
    write_endless_search(&env);
    mock.push(tool_reply("g", "grep", json!({"pattern": SLOW})));
    mock.push(text_reply("gave up"));
    let mut s = env.stdio(&[]);
    s.user("search");
    s.until_type("tool_start");
    let (code, rest, stderr) = s.finish();
    assert_eq!(code, Some(0), "{stderr}");
    let end = find(&rest, "tool_end");
    assert!(
        end["output"]
            .as_str()
            .unwrap()
            .starts_with("grep: timed out after 1 s"),
        "{end}"
    );
    assert_eq!(find(&rest, "done")["stop_reason"], "end_turn");
}
