//! End to end: sessions on disk, `--continue` and its transcript line (with the
//! 4096-character and 256 KiB caps), single ownership, resume after SIGKILL, a torn or corrupt
//! record, and `-p --continue`, through the real binary against the loopback mock.
//!
//! Already covered elsewhere (not repeated here): exit 2 in a fresh project
//! (`cli.rs` `continue_without_a_session_exits_2`) and the basic resume of one exchange
//! (`cli.rs` `continue_resumes_with_a_transcript`).

use std::io::Write;

use openmax_tests::*;
use serde_json::{json, Value};

fn setup(replies: Vec<Reply>) -> (TestEnv, MockServer) {
    let env = TestEnv::new();
    let mock = MockServer::start(replies);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    env.trust();
    (env, mock)
}

/// `(role, content)` of each transcript message.
fn pairs(t: &Value) -> Vec<(String, String)> {
    t["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_string(),
                m["content"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Start `--continue`, check hello and return the session and its transcript line.
fn resume(env: &TestEnv, sid: &Value) -> (Session, Value) {
    let mut s = env.stdio(&["--continue"]);
    assert_eq!(s.hello["continued"], true);
    assert_eq!(&s.hello["session_id"], sid);
    let t = s.event();
    assert_eq!(t["type"], "transcript");
    assert_eq!(&t["session_id"], sid);
    (s, t)
}

#[test]
fn several_turns_with_tools_then_continue_sends_the_whole_history() {
    let (env, mock) = setup(vec![
        tool_reply("r1", "read_file", json!({"path":"a.txt"})),
        text_reply("A1: it holds alpha"),
        tool_reply("s1", "shell", json!({"command":"echo shell-said-$((6*7))"})),
        text_reply("A2: the shell said 42"),
        text_reply("A3: plain answer"),
        text_reply("A4: continued"),
    ]);
    env.write("a.txt", "alpha-content\n");
    env.set_mode("auto");
    let mut s = env.stdio(&[]);
    let sid = s.hello["session_id"].clone();
    for q in ["Q1 read a.txt", "Q2 run the shell", "Q3 just answer"] {
        s.user(q);
        let (_, reason) = s.turn();
        assert_eq!(reason, "end_turn");
    }
    assert_eq!(s.finish().0, Some(0));
    assert_eq!(mock.requests().len(), 5);

    let (mut s, t) = resume(&env, &sid);
    assert_eq!(t["truncated"], false);
    let texts: Vec<(String, String)> = pairs(&t)
        .into_iter()
        .filter(|(_, c)| !c.is_empty())
        .collect();
    let want: Vec<(String, String)> = [
        ("user", "Q1 read a.txt"),
        ("assistant", "A1: it holds alpha"),
        ("user", "Q2 run the shell"),
        ("assistant", "A2: the shell said 42"),
        ("user", "Q3 just answer"),
        ("assistant", "A3: plain answer"),
    ]
    .iter()
    .map(|(r, c)| (r.to_string(), c.to_string()))
    .collect();
    assert_eq!(texts, want, "{t}");
    // Tool traffic is not in the transcript.
    assert!(!t.to_string().contains("alpha-content"), "{t}");
    // No live events are replayed: the next line is the answer to the next command.
    s.user("Q4 go on");
    let (evs, _) = s.turn();
    assert_eq!(types(&evs)[0], "token", "{:?}", types(&evs));
    assert_eq!(tokens(&evs), "A4: continued");
    assert_eq!(s.finish().0, Some(0));

    // The model received the whole history, tool calls and results included, in order.
    let body = mock.requests()[5].body.to_string();
    let mut at = 0;
    for needle in [
        "Q1 read a.txt",
        "r1",
        "alpha-content",
        "A1: it holds alpha",
        "Q2 run the shell",
        "s1",
        "shell-said-42",
        "A2: the shell said 42",
        "Q3 just answer",
        "A3: plain answer",
        "Q4 go on",
    ] {
        let found = body[at..]
            .find(needle)
            .unwrap_or_else(|| panic!("{needle:?} missing or out of order in {body}"));
        at += found + needle.len();
    }
}

#[test]
fn transcript_caps_each_message_at_4096_chars_on_a_char_boundary() {
    let (env, mock) = setup(vec![text_reply("short")]);
    let long: String = "é".repeat(5000);
    let mut s = env.stdio(&[]);
    let sid = s.hello["session_id"].clone();
    s.user(&long);
    s.turn();
    assert_eq!(s.finish().0, Some(0));

    let (mut s, t) = resume(&env, &sid);
    assert_eq!(t["truncated"], true);
    let p = pairs(&t);
    assert_eq!(p[0].1.chars().count(), 4096);
    assert!(p[0].1.chars().all(|c| c == 'é'));
    assert_eq!(p[1].1, "short");
    s.user("next");
    s.turn();
    assert_eq!(s.finish().0, Some(0));
    // The model still gets the whole message.
    assert!(mock.requests()[1].body.to_string().contains(&long));
}

#[test]
fn transcript_keeps_the_most_recent_256_kib_and_the_model_gets_everything() {
    const TURNS: usize = 40;
    let (env, mock) = setup(vec![]);
    let reply = |i: usize| format!("R{i:03}{}", "b".repeat(4000));
    for i in 0..TURNS {
        mock.push(text_reply(&reply(i)));
    }
    let question = |i: usize| format!("Q{i:03}{}", "a".repeat(4000));
    let mut s = env.stdio(&[]);
    let sid = s.hello["session_id"].clone();
    for i in 0..TURNS {
        s.user(&question(i));
        let (_, reason) = s.turn();
        assert_eq!(reason, "end_turn");
    }
    assert_eq!(s.finish().0, Some(0));

    let (mut s, t) = resume(&env, &sid);
    assert_eq!(t["truncated"], true);
    let p = pairs(&t);
    let content: usize = p.iter().map(|(_, c)| c.len()).sum();
    assert!(content <= 256 * 1024, "{content} bytes of content");
    // Everything that fits is kept: one more message would not have.
    assert!(content + 4004 > 256 * 1024, "only {content} bytes kept");
    // The most recent messages, in order, ending with the last reply.
    assert_eq!(p.last().unwrap().1, reply(TURNS - 1));
    let n = p.len();
    for (k, (role, c)) in p.iter().enumerate() {
        let back = n - 1 - k; // 0 = last message
        let turn = TURNS - 1 - back / 2;
        if back.is_multiple_of(2) {
            assert_eq!((role.as_str(), c), ("assistant", &reply(turn)));
        } else {
            assert_eq!((role.as_str(), c), ("user", &question(turn)));
        }
    }
    assert!(!t.to_string().contains("Q000"), "the oldest were dropped");
    s.user("last");
    s.turn();
    assert_eq!(s.finish().0, Some(0));
    let body = mock.requests()[TURNS].body.to_string();
    assert!(body.contains(&question(0)) && body.contains(&reply(0)));
}

#[test]
fn a_second_continue_while_the_owner_lives_fails_before_the_handshake() {
    let (env, _mock) = setup(vec![text_reply("one"), text_reply("two")]);
    let mut owner = env.stdio(&[]);
    let sid = owner.hello["session_id"].as_str().unwrap().to_string();
    owner.user("hi");
    owner.turn();
    // The owner is idle between turns and still owns the session.
    let out = env.run(&["--stdio", "--continue"]);
    assert_ne!(out.code, Some(0), "{}", out.stderr);
    assert_ne!(out.code, Some(2), "not 'no session': {}", out.stderr);
    assert_eq!(out.stdout, "", "nothing on stdout, not even hello");
    assert!(
        out.stderr.contains(&sid)
            && out.stderr.contains("owned by another openmax process")
            && out.stderr.contains(&format!("pid {}", owner.pid())),
        "{}",
        out.stderr
    );
    // Print mode too.
    let out = env.run(&["--continue", "-p", "x"]);
    assert_ne!(out.code, Some(0));
    assert_eq!(out.stdout, "");
    assert!(
        out.stderr.contains("owned by another openmax process"),
        "{}",
        out.stderr
    );
    // The owner goes on undisturbed.
    owner.user("again");
    let (evs, _) = owner.turn();
    assert_eq!(tokens(&evs), "two");
    assert_eq!(owner.finish().0, Some(0));
    // Once the owner is gone, --continue works.
    let (s, t) = resume(&env, &json!(sid));
    assert_eq!(pairs(&t).len(), 4);
    assert_eq!(s.finish().0, Some(0));
}

#[test]
fn resume_after_the_owner_was_killed_with_sigkill() {
    let (env, mock) = setup(vec![
        text_reply("first answer"),
        tool_reply("w", "write_file", json!({"path":"n.txt","content":"x\n"})),
    ]);
    env.set_mode("ask");
    let mut s = env.stdio(&[]);
    let sid = s.hello["session_id"].clone();
    s.user("first");
    s.turn();
    // Killed while waiting for an approval, mid-turn.
    s.user("second");
    s.until_type("approval_request");
    let pid = s.pid() as i32;
    s.kill_hard();
    assert!(wait_gone(pid));

    mock.push(text_reply("after the crash"));
    let (mut s, t) = resume(&env, &sid);
    let p = pairs(&t);
    assert_eq!(p[0], ("user".into(), "first".into()));
    assert_eq!(p[1], ("assistant".into(), "first answer".into()));
    assert_eq!(p[2], ("user".into(), "second".into()));
    s.user("third");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "end_turn");
    assert_eq!(tokens(&evs), "after the crash");
    assert_eq!(s.finish().0, Some(0));
    assert!(
        env.read("n.txt").is_none(),
        "the unapproved write never ran"
    );
    // The model gets a well-formed history: the interrupted call is answered before "third".
    let text = mock.requests().last().unwrap().body.to_string();
    assert!(
        text.contains("first answer") && text.contains("third"),
        "{text}"
    );
    // (Anthropic shape) the dangling tool_use gets an error tool_result in the next user message.
    let msgs = mock.requests().last().unwrap().body["messages"].clone();
    let msgs = msgs.as_array().unwrap();
    let last = &msgs[msgs.len() - 1]["content"];
    assert_eq!(last[0]["type"], "tool_result", "{last}");
    assert_eq!(last[0]["tool_use_id"], "w");
    assert_eq!(last[0]["is_error"], true);
    assert_eq!(msgs[msgs.len() - 2]["content"][0]["id"], "w");
}

#[test]
fn print_mode_continue_resumes_the_same_session() {
    let (env, mock) = setup(vec![text_reply("one"), text_reply("two")]);
    let out = env.run(&["--continue", "-p", "x"]);
    assert_eq!(out.code, Some(2), "no session yet: {}", out.stderr);
    assert!(out.stderr.contains("no prior session"), "{}", out.stderr);
    let out = env.run(&["-p", "remember 1234"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout, "one\n");
    let out = env.run(&["--continue", "-p", "what was it"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout, "two\n", "no transcript is printed in -p");
    let body = mock.requests()[1].body.to_string();
    assert!(body.contains("remember 1234") && body.contains("what was it"));
    // Both exchanges are in one session.
    let mut s = env.stdio(&["--continue"]);
    let t = s.event();
    assert_eq!(pairs(&t).len(), 4, "{t}");
    assert_eq!(s.finish().0, Some(0));
}

#[test]
fn a_torn_last_line_is_ignored_with_a_notice_and_cut_off() {
    let (env, _mock) = setup(vec![text_reply("kept")]);
    let mut s = env.stdio(&[]);
    let sid = s.hello["session_id"].clone();
    s.user("q");
    s.turn();
    assert_eq!(s.finish().0, Some(0));
    let record = env.record_path(sid.as_str().unwrap());
    let good = std::fs::read(&record).unwrap();
    std::fs::OpenOptions::new()
        .append(true)
        .open(&record)
        .unwrap()
        .write_all(br#"{"v":1,"rec":"message","message":{"role":"assist"#)
        .unwrap();

    let (s, t) = resume(&env, &sid);
    assert_eq!(pairs(&t)[1].1, "kept");
    let (code, _, stderr) = s.finish();
    assert_eq!(code, Some(0));
    assert!(stderr.contains("ignored a torn last line"), "{stderr}");
    let now = std::fs::read(&record).unwrap();
    assert!(now.starts_with(&good) && now.ends_with(b"\n"));
    // The next resume is clean.
    let (s, _) = resume(&env, &sid);
    let (_, _, stderr) = s.finish();
    assert!(!stderr.contains("torn"), "{stderr}");
}

#[test]
fn a_corrupt_record_line_fails_before_the_handshake_naming_file_and_line() {
    let (env, _mock) = setup(vec![text_reply("a"), text_reply("b")]);
    let mut s = env.stdio(&[]);
    let sid = s.hello["session_id"].clone();
    for q in ["one", "two"] {
        s.user(q);
        s.turn();
    }
    assert_eq!(s.finish().0, Some(0));
    let record = env.record_path(sid.as_str().unwrap());
    let text = std::fs::read_to_string(&record).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() >= 4);
    lines[2] = "this is not a record";
    std::fs::write(&record, lines.join("\n") + "\n").unwrap();
    let out = env.run(&["--stdio", "--continue"]);
    assert_ne!(out.code, Some(0));
    assert_eq!(out.stdout, "");
    assert!(
        out.stderr.contains(&record.display().to_string()) && out.stderr.contains('3'),
        "{}",
        out.stderr
    );
    // Nothing was cut from a corrupt record.
    assert_eq!(
        std::fs::read_to_string(&record).unwrap(),
        lines.join("\n") + "\n"
    );
}

/// Two sessions, then the index is damaged (`corrupt`: garbage; else deleted): `--continue`
/// rebuilds it from the records with a notice on stderr and resumes the session written last.
fn index_damaged_then_continue(corrupt: bool) {
    let (env, _mock) = setup(vec![text_reply("a"), text_reply("b"), text_reply("c")]);
    let mut ids = Vec::new();
    for text in ["one", "two"] {
        let mut s = env.stdio(&[]);
        ids.push(s.hello["session_id"].clone());
        s.user(text);
        s.turn();
        assert_eq!(s.finish().0, Some(0));
        // Distinct modification times (coarse file systems tick in 10 ms or more).
        std::thread::sleep(std::time::Duration::from_millis(30));
    }
    let sessions = env
        .record_path(ids[1].as_str().unwrap())
        .parent()
        .unwrap()
        .to_path_buf();
    let index = sessions.join("index.json");
    if corrupt {
        std::fs::write(&index, "{ not json").unwrap();
    } else {
        std::fs::remove_file(&index).unwrap();
    }
    // The contract: a continued session must have a readable index. --continue and --resume
    // fail before the handshake, naming the repair; nothing is rebuilt behind the person's back.
    for args in [
        &["--stdio", "--continue"][..],
        &["--stdio", "--resume", ids[1].as_str().unwrap()],
    ] {
        let out = env.run(args);
        assert_eq!(out.code, Some(1), "{args:?}: {}", out.stderr);
        assert_eq!(out.stdout, "", "{args:?}: nothing before the handshake");
        assert!(
            out.stderr.contains("openmax sessions repair"),
            "{}",
            out.stderr
        );
    }
    let listed = env.run(&["sessions"]);
    assert_eq!(listed.code, Some(1));
    assert!(
        listed.stderr.contains("openmax sessions repair"),
        "{}",
        listed.stderr
    );
    if corrupt {
        assert_eq!(
            std::fs::read_to_string(&index).unwrap(),
            "{ not json",
            "left as it was"
        );
    } else {
        assert!(!index.exists());
    }
    let repaired = env.run(&["sessions", "repair"]);
    assert_eq!(repaired.code, Some(0), "{}", repaired.stderr);
    assert!(
        repaired.stdout.contains("rebuilt") && repaired.stdout.contains("2 session record(s)"),
        "{}",
        repaired.stdout
    );
    let (mut s, t) = resume(&env, &ids[1]);
    assert_eq!(pairs(&t).last().unwrap().0, "assistant");
    s.user("three");
    let (events, _) = s.turn();
    assert_eq!(find(&events, "done")["stop_reason"], "end_turn");
    let (code, _, _) = s.finish();
    assert_eq!(code, Some(0));
    let rebuilt: Value = serde_json::from_str(&std::fs::read_to_string(&index).unwrap()).unwrap();
    let listed: Vec<&str> = rebuilt["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert_eq!(listed, [ids[0].as_str().unwrap(), ids[1].as_str().unwrap()]);
    let kept: Vec<_> = std::fs::read_dir(&sessions)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("index.json.corrupt-")
        })
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect();
    if corrupt {
        assert_eq!(kept, ["{ not json"], "the corrupt index is kept aside");
    } else {
        assert!(kept.is_empty());
    }
}

#[test]
fn a_deleted_index_stops_continue_until_repaired() {
    index_damaged_then_continue(false);
}

#[test]
fn a_corrupt_index_stops_continue_until_repaired_and_is_kept_aside() {
    index_damaged_then_continue(true);
}

/// Remove every `cache_control` key (Anthropic cache markers move with the last message).
fn strip_cache(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.remove("cache_control");
            m.values_mut().for_each(strip_cache);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_cache),
        _ => {}
    }
}

/// After compactions, `--continue` sends the model exactly what the live process would have:
/// the last compaction point on disk and everything after it, with the same system prompt and
/// frozen schemas.
#[test]
fn continue_after_compaction_sends_what_the_live_process_would() {
    const TURNS: usize = 16;
    let env = TestEnv::new();
    let mock = MockServer::start(vec![]);
    env.mock_config(
        Flavor::Anthropic,
        &mock.base_url(),
        "context_tokens = 22000",
    );
    env.trust();
    for i in 0..TURNS {
        mock.push(text_reply(&format!("R{i:02} {}", "word ".repeat(500))));
    }
    let mut s = env.stdio(&[]);
    let sid = s.hello["session_id"].clone();
    let mut compactions = 0;
    for i in 0..TURNS {
        s.user(&format!("Q{i:02} {}", "ask ".repeat(700)));
        let (evs, reason) = s.turn();
        assert_eq!(reason, "end_turn");
        compactions += evs.iter().filter(|e| e["type"] == "compacted").count();
    }
    assert_eq!(s.finish().0, Some(0));
    assert!(compactions > 0, "the small window forced a compaction");
    let live = mock.requests().last().unwrap().body.clone();
    assert!(
        !live.to_string().contains("Q00 "),
        "the first question was compacted away"
    );

    mock.push(text_reply("after"));
    let (mut s, _t) = resume(&env, &sid);
    s.user("next");
    let (_, reason) = s.turn();
    assert_eq!(reason, "end_turn");
    assert_eq!(s.finish().0, Some(0));
    let mut resumed = mock.requests().last().unwrap().body.clone();
    let mut live = live;
    strip_cache(&mut resumed);
    strip_cache(&mut live);
    assert_eq!(resumed["system"], live["system"]);
    assert_eq!(resumed["tools"], live["tools"]);
    let lm = live["messages"].as_array().unwrap();
    let rm = resumed["messages"].as_array().unwrap();
    // Live: … Q15. Resumed: … Q15, R15, next (unless the resumed request compacted again).
    assert_eq!(rm.len(), lm.len() + 2, "{resumed}");
    assert_eq!(&rm[..lm.len()], &lm[..]);
    assert!(rm[lm.len()].to_string().contains("R15 "));
    assert!(rm[lm.len() + 1].to_string().contains("next"));
}

/// Sessions started at once in one project each get their own record and all land in the
/// index; `--continue` takes the one used last (their turns run one after another, so which
/// one that is is known).
/// A new session in a project whose index is gone rebuilds it from the records and says so on
/// stderr; a project's very first session, which has no index yet either, says nothing.
#[test]
fn a_missing_index_is_rebuilt_by_a_new_session_and_said_only_when_there_were_others() {
    let (env, _mock) = setup(vec![text_reply("a"), text_reply("b")]);
    let mut ids = Vec::new();
    let mut said = Vec::new();
    for text in ["one", "two"] {
        let mut s = env.stdio(&[]);
        ids.push(s.hello["session_id"].as_str().unwrap().to_string());
        s.user(text);
        s.turn();
        let (code, _, stderr) = s.finish();
        assert_eq!(code, Some(0), "{stderr}");
        said.push(stderr);
        let index = env
            .record_path(&ids[0])
            .parent()
            .unwrap()
            .join("index.json");
        assert!(index.exists());
        std::fs::remove_file(index).unwrap();
    }
    // Nothing at all: no warning of any kind from a plain first session.
    assert_eq!(said[0], "", "the first session");
    assert!(
        said[1].contains("the session index was missing; rebuilt"),
        "the second session: {}",
        said[1]
    );
}

#[test]
fn concurrent_sessions_all_land_in_the_index() {
    let (env, _mock) = setup(vec![]);
    let mut live: Vec<Session> = (0..4).map(|_| env.stdio(&[])).collect();
    let ids: Vec<String> = live
        .iter()
        .map(|s| s.hello["session_id"].as_str().unwrap().to_string())
        .collect();
    for (k, s) in live.iter_mut().enumerate() {
        s.user(&format!("session {k}"));
        s.turn();
    }
    for s in live {
        assert_eq!(s.finish().0, Some(0));
    }
    let sessions = env.record_path(&ids[0]).parent().unwrap().to_path_buf();
    let index: Value =
        serde_json::from_str(&std::fs::read_to_string(sessions.join("index.json")).unwrap())
            .unwrap();
    let listed: Vec<&str> = index["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    for id in &ids {
        assert!(listed.contains(&id.as_str()), "{id} missing from {index}");
        assert!(env.record_path(id).exists());
    }
    let mut s = env.stdio(&["--continue"]);
    let sid = s.hello["session_id"].as_str().unwrap().to_string();
    assert_eq!(sid, ids[3], "the one used last");
    let t = s.event();
    assert_eq!(pairs(&t)[0].1, "session 3");
    assert_eq!(s.finish().0, Some(0));
}

#[test]
fn a_missing_record_fails_before_the_handshake() {
    let (env, _mock) = setup(vec![]);
    let mut s = env.stdio(&[]);
    let sid = s.hello["session_id"].as_str().unwrap().to_string();
    s.user("x");
    s.turn();
    assert_eq!(s.finish().0, Some(0));
    std::fs::remove_file(env.record_path(&sid)).unwrap();
    let out = env.run(&["--stdio", "--continue"]);
    assert_ne!(out.code, Some(0));
    assert_eq!(out.stdout, "");
    assert!(out.stderr.contains(&sid), "{}", out.stderr);
}

/// A stream that ends mid-answer with no completion signal reports message_done with the
/// partial text, which is kept in the session: it is in the transcript and sent to the model.
#[test]
fn a_truncated_reply_reported_finished_is_kept() {
    let (env, mock) = setup(vec![
        Reply::Stream {
            items: vec![StreamItem::Text {
                text: "partial answer".into(),
            }],
            end: StreamEnd::CleanEof,
            delay_ms: 0,
        },
        text_reply("next"),
    ]);
    let mut s = env.stdio(&[]);
    let sid = s.hello["session_id"].clone();
    s.user("q");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "truncated");
    assert_eq!(find(&evs, "message_done")["text"], "partial answer");
    let (code, _, _) = s.finish();
    assert_eq!(code, Some(0), "--stdio exits 1 only for `error`");
    let (mut s, t) = resume(&env, &sid);
    assert_eq!(pairs(&t)[1].1, "partial answer");
    s.user("go on");
    s.turn();
    assert_eq!(s.finish().0, Some(0));
    assert!(mock.requests()[1]
        .body
        .to_string()
        .contains("partial answer"));
}

/// A resumed owner holds the session like a fresh one; a lock file left by a dead owner (its
/// content naming some other live pid) is not an owner.
#[test]
fn a_resumed_owner_excludes_others_and_a_stale_lock_file_does_not() {
    let (env, _mock) = setup(vec![]);
    let mut s = env.stdio(&[]);
    let sid = s.hello["session_id"].clone();
    s.user("one");
    s.turn();
    assert_eq!(s.finish().0, Some(0));
    let lock = env
        .record_path(sid.as_str().unwrap())
        .with_extension("lock");
    std::fs::write(&lock, "1\n").unwrap();
    let (mut owner, _) = resume(&env, &sid);
    let out = env.run(&["--stdio", "--continue"]);
    assert_ne!(out.code, Some(0));
    assert_eq!(out.stdout, "");
    assert!(
        out.stderr.contains(&format!("pid {}", owner.pid())),
        "{}",
        out.stderr
    );
    owner.user("two");
    owner.turn();
    assert_eq!(owner.finish().0, Some(0));
}
