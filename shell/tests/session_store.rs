//! Session store tests: create/append/resume round trips, compaction points, refreeze and mode
//! records, torn and corrupt lines, ownership, the transcript caps, and the index's atomicity.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use openmax_core::conversation::{Block, Message, Role, ToolSchema};
use openmax_core::record::{Record, RecordLine};
use openmax_core::wire::Mode;
use openmax_shell::session::index::read_index;
use openmax_shell::session::{
    resume_latest, Home, ProjectState, ResumeError, SessionWriter, StoreError,
};

/// A temporary directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let p = std::env::temp_dir().join(format!(
            "openmax-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).expect("temp dir is creatable");
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// A state root and a project directory in a temp dir.
fn setup(tag: &str) -> (TempDir, ProjectState) {
    let t = TempDir::new(tag);
    let project = t.0.join("proj");
    fs::create_dir_all(&project).expect("project dir is creatable");
    let home = Home::new(t.0.join("home"));
    let state = ProjectState::open(&home, &project);
    (t, state)
}

fn tool(name: &str) -> ToolSchema {
    ToolSchema {
        name: name.to_string(),
        description: format!("the {name} tool"),
        parameters: serde_json::json!({"type": "object"}),
    }
}

fn header(id: &str) -> Record {
    Record::Session {
        session_id: id.to_string(),
        project: "/p".to_string(),
        system: "system v1".to_string(),
        tools: vec![tool("read_file")],
    }
}

/// Change the index on disk as `change` says (a hint lost or made wrong behind openmax's back).
fn rewrite_index(dir: &Path, change: impl FnOnce(&mut openmax_shell::session::index::Index)) {
    let mut index = read_index(dir).expect("index");
    change(&mut index);
    openmax_shell::session::write_atomic(
        &dir.join("index.json"),
        &serde_json::to_vec(&index).expect("serializes"),
    )
    .expect("write index");
}

fn msg(m: Message) -> Record {
    Record::Message { message: m }
}

fn tool_call_pair(id: &str) -> Vec<Record> {
    vec![
        msg(Message {
            role: Role::Assistant,
            content: vec![
                Block::text("let me look"),
                Block::ToolUse {
                    id: id.to_string(),
                    name: "read_file".to_string(),
                    input: serde_json::json!({"path": "a.rs"}),
                },
            ],
        }),
        msg(Message {
            role: Role::User,
            content: vec![Block::ToolResult {
                id: id.to_string(),
                ok: true,
                output: "fn main() {}".to_string(),
            }],
        }),
    ]
}

/// A new session in which a prompt was admitted (a session with none is never resumed).
fn create_used(state: &ProjectState, id: &str) -> SessionWriter {
    let mut w = SessionWriter::create(state, id, header(id)).expect("create");
    w.append(&[msg(Message::user_text("a prompt"))])
        .expect("append");
    w
}

fn record_path(state: &ProjectState, id: &str) -> PathBuf {
    state.sessions_dir().join(format!("{id}.jsonl"))
}

fn append_raw(path: &Path, bytes: &[u8]) {
    let mut f = fs::OpenOptions::new()
        .append(true)
        .open(path)
        .expect("record exists");
    f.write_all(bytes).expect("append works");
}

#[test]
fn create_append_resume_round_trip() {
    let (_t, state) = setup("roundtrip");
    let mut w = SessionWriter::create(&state, "s1", header("s1")).expect("create");
    assert_eq!(w.session_id(), "s1");
    let mut records = vec![msg(Message::user_text("hello"))];
    records.extend(tool_call_pair("c1"));
    records.push(msg(Message::assistant_text("done reading")));
    records.push(Record::TurnEnd {
        stop_reason: "stop".into(),
        turn: None,
    });
    w.append(&records).expect("append");
    w.append(&[msg(Message::user_text("again"))])
        .expect("append");
    drop(w);

    let r = resume_latest(&state).expect("resume");
    assert!(r.notices.is_empty(), "{:?}", r.notices);
    assert_eq!(r.session_id, "s1");
    assert_eq!(r.system, "system v1");
    assert_eq!(r.tools, vec![tool("read_file")]);
    assert_eq!(r.mode, None);
    assert_eq!(r.history.len(), 5);
    assert_eq!(r.history[0], Message::user_text("hello"));
    assert_eq!(r.history[4], Message::user_text("again"));
    // Transcript: user/assistant text only, no tool traffic.
    let t: Vec<(String, String)> = r
        .transcript
        .messages
        .iter()
        .map(|m| (m.role.clone(), m.content.clone()))
        .collect();
    assert_eq!(
        t,
        vec![
            ("user".into(), "hello".into()),
            ("assistant".into(), "let me look".into()),
            ("assistant".into(), "done reading".into()),
            ("user".into(), "again".into()),
        ]
    );
    assert!(!r.transcript.truncated);
    assert_eq!(r.transcript.session_id, "s1");

    // The resumed writer appends where the record left off.
    let mut w = r.writer;
    w.append(&[msg(Message::assistant_text("third"))])
        .expect("append after resume");
    drop(w);
    let r = resume_latest(&state).expect("second resume");
    assert_eq!(r.history.len(), 6);
    assert_eq!(r.history[5], Message::assistant_text("third"));

    // Every line is a versioned record line.
    let text = fs::read_to_string(record_path(&state, "s1")).expect("record");
    for line in text.lines() {
        let l: RecordLine = serde_json::from_str(line).expect("record line");
        assert_eq!(l.v, 1);
    }
    assert_eq!(text.lines().count(), 8);
}

#[test]
fn latest_session_is_the_most_recently_used() {
    let (_t, state) = setup("latest");
    let mut a = SessionWriter::create(&state, "a", header("a")).expect("create a");
    a.append(&[msg(Message::user_text("in a"))])
        .expect("append");
    drop(a);
    let mut b = SessionWriter::create(&state, "b", header("b")).expect("create b");
    b.append(&[msg(Message::user_text("in b"))])
        .expect("append");
    drop(b);
    let r = resume_latest(&state).expect("resume");
    assert_eq!(r.session_id, "b");
    let index = read_index(&state.sessions_dir()).expect("index");
    let ids: Vec<&str> = index.sessions.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids, vec!["a", "b"]);
    assert!(matches!(
        SessionWriter::create(&state, "a", header("a")),
        Err(StoreError::Exists(_))
    ));
    assert!(matches!(
        SessionWriter::create(&state, "../x", header("../x")),
        Err(StoreError::Invalid(_))
    ));
    assert!(matches!(
        SessionWriter::create(&state, "c", header("other")),
        Err(StoreError::Invalid(_))
    ));
}

#[test]
fn history_starts_at_the_last_compaction_point() {
    let (_t, state) = setup("compaction");
    let mut w = SessionWriter::create(&state, "s", header("s")).expect("create");
    for i in 0..10 {
        w.append(&[
            msg(Message::user_text(format!("q{i}"))),
            msg(Message::assistant_text(format!("a{i}"))),
        ])
        .expect("append");
    }
    w.append(&[Record::Compaction {
        messages: vec![Message::user_text("summary 1")],
        tokens_before: 100,
        tokens_after: 10,
        compacted_messages: 20,
    }])
    .expect("compaction 1");
    w.append(&[msg(Message::user_text("q10"))]).expect("append");
    w.append(&[
        msg(Message::assistant_text("a10")),
        Record::Compaction {
            messages: vec![Message::user_text("summary 2")],
            tokens_before: 50,
            tokens_after: 5,
            compacted_messages: 3,
        },
        msg(Message::user_text("q11")),
    ])
    .expect("compaction 2 in a batch");
    drop(w);

    // The index points at the second compaction line.
    let text = fs::read_to_string(record_path(&state, "s")).expect("record");
    let second = text.find("summary 2").expect("second compaction");
    let line_start = text[..second].rfind('\n').expect("not line 1") as u64 + 1;
    let index = read_index(&state.sessions_dir()).expect("index");
    let cp = index.sessions[0].compaction.expect("compaction point");
    assert_eq!(cp.offset, line_start);
    assert_eq!(cp.line, 25);

    let r = resume_latest(&state).expect("resume");
    assert_eq!(
        r.history,
        vec![Message::user_text("summary 2"), Message::user_text("q11")]
    );
    // The transcript still shows the messages before the compaction, from message records.
    let contents: Vec<&str> = r
        .transcript
        .messages
        .iter()
        .map(|m| m.content.as_str())
        .collect();
    assert_eq!(contents.len(), 23);
    assert_eq!(contents[0], "q0");
    assert_eq!(&contents[20..], &["q10", "a10", "q11"]);
    assert!(!r.transcript.truncated);
}

#[test]
fn a_lagging_or_wrong_index_hint_is_still_correct() {
    let (_t, state) = setup("hint");
    let mut w = SessionWriter::create(&state, "s", header("s")).expect("create");
    w.append(&[msg(Message::user_text("q0"))]).expect("append");
    w.append(&[Record::Compaction {
        messages: vec![Message::user_text("sum")],
        tokens_before: 1,
        tokens_after: 1,
        compacted_messages: 1,
    }])
    .expect("append");
    w.append(&[msg(Message::user_text("q1"))]).expect("append");
    drop(w);
    // Simulate a crash between the record and the index: drop the hint.
    let dir = state.sessions_dir();
    rewrite_index(&dir, |index| {
        index.sessions[0].compaction = None;
    });
    let r = resume_latest(&state).expect("resume");
    assert_eq!(
        r.history,
        vec![Message::user_text("sum"), Message::user_text("q1")]
    );
    drop(r);
    // Resume caught the index up.
    let cp = read_index(&dir).expect("index").sessions[0]
        .compaction
        .expect("hint restored");
    // Now point the hint at a wrong offset: resume reads the whole record, with a notice.
    rewrite_index(&dir, |index| {
        index.sessions[0].compaction = Some(openmax_shell::session::index::CompactionPoint {
            offset: cp.offset + 1,
            ..cp
        });
    });
    let r = resume_latest(&state).expect("resume");
    assert_eq!(
        r.history,
        vec![Message::user_text("sum"), Message::user_text("q1")]
    );
    assert_eq!(r.notices.len(), 1, "{:?}", r.notices);
    assert!(r.notices[0].contains("not used"), "{}", r.notices[0]);
    drop(r);
    // The bad hint was replaced: the next resume has nothing to say.
    assert_eq!(
        read_index(&dir).expect("index").sessions[0].compaction,
        Some(cp)
    );
    let r = resume_latest(&state).expect("resume");
    assert!(r.notices.is_empty(), "{:?}", r.notices);
    // A refreeze after the compaction: a hint naming it as the one in force at the compaction
    // (its offset past the compaction's) is not used either.
    let mut w = r.writer;
    let at = fs::metadata(dir.join("s.jsonl")).expect("record").len();
    w.append(&[Record::Refrozen {
        system: "later".into(),
        tools: vec![],
    }])
    .expect("append");
    drop(w);
    rewrite_index(&dir, |index| {
        index.sessions[0].compaction = Some(openmax_shell::session::index::CompactionPoint {
            refrozen_offset: Some(at),
            ..cp
        });
    });
    let r = resume_latest(&state).expect("resume");
    assert_eq!(r.notices.len(), 1, "{:?}", r.notices);
    assert!(r.notices[0].contains("not used"), "{}", r.notices[0]);
    assert_eq!(r.system, "later");
}

#[test]
fn refrozen_and_mode_changed_apply_across_compaction() {
    let (_t, state) = setup("refrozen");
    let mut w = SessionWriter::create(&state, "s", header("s")).expect("create");
    w.append(&[
        msg(Message::user_text("q0")),
        Record::ModeChanged { mode: Mode::Auto },
        Record::Refrozen {
            system: "system v2".to_string(),
            tools: vec![tool("read_file"), tool("grep")],
        },
        msg(Message::user_text("q1")),
    ])
    .expect("append");
    drop(w);
    let r = resume_latest(&state).expect("resume");
    assert_eq!(r.system, "system v2");
    assert_eq!(r.tools.len(), 2);
    assert_eq!(r.mode, Some(Mode::Auto));

    // After a compaction the earlier refrozen and mode lines are before the resume point:
    // the index carries them.
    let mut w = r.writer;
    w.append(&[
        Record::ModeChanged {
            mode: Mode::Readonly,
        },
        Record::Compaction {
            messages: vec![Message::user_text("sum")],
            tokens_before: 1,
            tokens_after: 1,
            compacted_messages: 2,
        },
        msg(Message::user_text("q2")),
    ])
    .expect("append");
    drop(w);
    let r = resume_latest(&state).expect("resume");
    assert_eq!(r.system, "system v2");
    assert_eq!(r.tools.len(), 2);
    assert_eq!(r.mode, Some(Mode::Readonly));
    assert_eq!(
        r.history,
        vec![Message::user_text("sum"), Message::user_text("q2")]
    );
    // And a refreeze after the compaction wins.
    let mut w = r.writer;
    w.append(&[
        Record::Refrozen {
            system: "system v3".to_string(),
            tools: vec![],
        },
        Record::ModeChanged { mode: Mode::Ask },
    ])
    .expect("append");
    drop(w);
    let r = resume_latest(&state).expect("resume");
    assert_eq!(r.system, "system v3");
    assert!(r.tools.is_empty());
    assert_eq!(r.mode, Some(Mode::Ask));
}

#[test]
fn torn_last_line_without_newline_is_ignored_and_cut() {
    let (_t, state) = setup("torn");
    let mut w = SessionWriter::create(&state, "s", header("s")).expect("create");
    w.append(&[msg(Message::user_text("kept"))])
        .expect("append");
    drop(w);
    let path = record_path(&state, "s");
    let good_len = fs::metadata(&path).expect("record").len();
    append_raw(
        &path,
        br#"{"v":1,"rec":"message","message":{"role":"user","con"#,
    );

    let r = resume_latest(&state).expect("resume");
    assert_eq!(r.history, vec![Message::user_text("kept")]);
    assert_eq!(r.notices.len(), 1, "{:?}", r.notices);
    assert!(r.notices[0].contains("torn"), "{}", r.notices[0]);
    assert!(r.notices[0].contains(&path.display().to_string()));
    assert_eq!(fs::metadata(&path).expect("record").len(), good_len);

    let mut w = r.writer;
    w.append(&[msg(Message::assistant_text("after"))])
        .expect("append");
    drop(w);
    let r = resume_latest(&state).expect("resume");
    assert!(r.notices.is_empty(), "{:?}", r.notices);
    assert_eq!(
        r.history,
        vec![Message::user_text("kept"), Message::assistant_text("after")]
    );
}

#[test]
fn a_copy_reads_a_torn_record_and_leaves_it_as_it_is() {
    let (_t, state) = setup("torn-copy");
    let mut w = SessionWriter::create(&state, "s", header("s")).expect("create");
    w.append(&[msg(Message::user_text("kept"))])
        .expect("append");
    drop(w);
    let path = record_path(&state, "s");
    append_raw(&path, br#"{"v":1,"rec":"message","mess"#);
    let before = fs::read(&path).expect("record");
    // `--fork` reads a copy: the history without the torn line, the record untouched (its
    // owner, if it is running, is the one to cut it).
    let copied = openmax_shell::session::resume::read_copy(&state, "s").expect("copy");
    assert_eq!(copied.history, vec![Message::user_text("kept")]);
    assert_eq!(fs::read(&path).expect("record"), before);
}

#[test]
fn a_session_that_exists_is_not_created_again_and_says_so() {
    let (_t, state) = setup("exists");
    drop(create_used(&state, "s"));
    let err = SessionWriter::create(&state, "s", header("s")).expect_err("exists");
    assert!(matches!(err, StoreError::Exists(_)), "{err:?}");
    let m = err.to_string();
    assert!(m.contains("s.jsonl") && m.contains("exists"), "{m}");
}

#[test]
fn unparseable_newline_terminated_last_line_is_torn() {
    let (_t, state) = setup("torn2");
    let mut w = SessionWriter::create(&state, "s", header("s")).expect("create");
    w.append(&[msg(Message::user_text("kept"))])
        .expect("append");
    drop(w);
    let path = record_path(&state, "s");
    append_raw(&path, b"\0\0\0garbage\n");
    let r = resume_latest(&state).expect("resume");
    assert_eq!(r.history, vec![Message::user_text("kept")]);
    assert_eq!(r.notices.len(), 1);
    assert!(fs::read(&path).expect("record").ends_with(b"}\n"));
}

#[test]
fn corrupt_middle_line_is_an_error_naming_file_and_line() {
    let (_t, state) = setup("corrupt");
    let mut w = SessionWriter::create(&state, "s", header("s")).expect("create");
    w.append(&[msg(Message::user_text("one"))]).expect("append");
    drop(w);
    let path = record_path(&state, "s");
    append_raw(&path, b"{not json\n");
    let mut w_lines = String::new();
    w_lines.push_str(&RecordLine::new(msg(Message::user_text("three"))).to_json());
    w_lines.push('\n');
    append_raw(&path, w_lines.as_bytes());
    let before = fs::read(&path).expect("record");

    let err = resume_latest(&state).expect_err("corrupt");
    let ResumeError::Corrupt(m) = &err else {
        panic!("expected Corrupt, got {err:?}");
    };
    assert!(m.contains(&path.display().to_string()), "{m}");
    assert!(m.contains("line 3"), "{m}");
    assert_eq!(err.exit_code(), 1);
    // Nothing was cut.
    assert_eq!(fs::read(&path).expect("record"), before);
}

#[test]
fn unknown_record_version_is_corrupt_even_as_the_last_line() {
    let (_t, state) = setup("version");
    let mut w = SessionWriter::create(&state, "s", header("s")).expect("create");
    w.append(&[msg(Message::user_text("one"))]).expect("append");
    drop(w);
    let path = record_path(&state, "s");
    append_raw(&path, b"{\"v\":2,\"rec\":\"hologram\",\"x\":1}\n");
    let before = fs::read(&path).expect("record");
    let err = resume_latest(&state).expect_err("unknown version");
    let ResumeError::Corrupt(m) = &err else {
        panic!("expected Corrupt, got {err:?}");
    };
    assert!(m.contains("unknown record version 2"), "{m}");
    assert!(m.contains("line 3"), "{m}");
    assert_eq!(fs::read(&path).expect("record"), before, "never cut");

    // The same line with a known version but an unknown kind is corrupt too.
    let (_t2, state2) = setup("version2");
    drop(create_used(&state2, "s"));
    append_raw(
        &record_path(&state2, "s"),
        b"{\"v\":1,\"rec\":\"hologram\"}\n",
    );
    assert!(matches!(
        resume_latest(&state2),
        Err(ResumeError::Corrupt(_))
    ));
}

/// Line 1 must be the session header: any other record there names its kind. A record that
/// cannot be read is an I/O error naming it, not a corrupt one.
#[test]
fn a_record_not_opening_with_its_header_or_unreadable_is_named() {
    let (_t, state) = setup("noheader");
    drop(create_used(&state, "s"));
    let path = record_path(&state, "s");
    let text = fs::read_to_string(&path).expect("record");
    let second = text.lines().nth(1).expect("a message line").to_string();
    for (line, kind) in [
        (second, "message"),
        (
            RecordLine::new(Record::TurnEnd {
                stop_reason: openmax_core::wire::StopReason::Provider("end_turn".into()),
                turn: None,
            })
            .to_json(),
            "turn_end",
        ),
    ] {
        fs::write(&path, format!("{line}\n")).expect("rewrite");
        let err = resume_latest(&state).expect_err("no header");
        let ResumeError::Corrupt(m) = &err else {
            panic!("expected Corrupt, got {err:?}");
        };
        assert!(
            m.contains(&format!(
                "line 1 is a {kind} record, not the session header"
            )),
            "{m}"
        );
    }
    fs::remove_file(&path).expect("remove");
    fs::create_dir(&path).expect("a directory where the record was");
    let err = resume_latest(&state).expect_err("unreadable");
    let ResumeError::Io(m) = &err else {
        panic!("expected Io, got {err:?}");
    };
    assert!(
        m.contains(&format!("cannot read session record {}", path.display())),
        "{m}"
    );
}

#[test]
fn no_session_is_exit_2() {
    let (_t, state) = setup("nosession");
    let err = resume_latest(&state).expect_err("no session");
    assert_eq!(err, ResumeError::NoSession);
    assert_eq!(err.exit_code(), 2);
    assert!(err.to_string().contains("no prior session"));
    // Nothing was created by looking.
    assert!(!state.dir().exists());
}

#[test]
fn a_corrupt_or_unknown_index_is_an_error_until_repaired_and_is_kept_aside() {
    let (_t, state) = setup("badindex");
    drop(create_used(&state, "s"));
    let index = state.sessions_dir().join("index.json");
    for damaged in [
        &b"{\"v\":1,\"sessions\":["[..],
        b"{\"v\":9,\"sessions\":[]}",
    ] {
        fs::write(&index, damaged).expect("write");
        // A continued session must have a readable index: never rebuilt silently.
        let err = resume_latest(&state).expect_err("an unreadable index");
        assert!(matches!(err, ResumeError::Corrupt(_)), "{err:?}");
        assert!(err.to_string().contains("openmax sessions repair"), "{err}");
        assert_eq!(fs::read(&index).expect("index"), damaged, "left as it was");
        let report =
            openmax_shell::session::rebuild::repair(&state.sessions_dir()).expect("repair");
        assert!(
            report.contains("1 session record(s) (1 with a prompt)"),
            "{report}"
        );
        let resumed = resume_latest(&state).expect("resumed after the repair");
        assert_eq!(resumed.session_id, "s");
        drop(resumed);
        let kept: Vec<Vec<u8>> = fs::read_dir(state.sessions_dir())
            .expect("dir")
            .flatten()
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with("index.json.corrupt-")
            })
            .map(|e| fs::read(e.path()).expect("read"))
            .collect();
        assert!(
            kept.iter().any(|k| k == damaged),
            "damaged index kept aside"
        );
    }
    // A missing index while a record exists: the same.
    fs::remove_file(&index).expect("remove");
    let err = resume_latest(&state).expect_err("a missing index");
    assert!(
        err.to_string().contains("is missing") && err.to_string().contains("repair"),
        "{err}"
    );
    openmax_shell::session::rebuild::repair(&state.sessions_dir()).expect("repair");
    drop(resume_latest(&state).expect("resumed after the repair"));
    // A record the index lists but that is missing.
    fs::write(
        &index,
        br#"{"v":1,"sessions":[{"id":"gone","created_ms":1,"updated_ms":1,"record":"gone.jsonl"}]}"#,
    )
    .expect("write");
    let err = resume_latest(&state).expect_err("missing record");
    assert!(matches!(err, ResumeError::Corrupt(_)));
    assert!(err.to_string().contains("gone.jsonl"), "{err}");
    assert!(
        err.to_string().contains(&index.display().to_string()),
        "{err}"
    );
}

#[test]
fn second_owner_is_locked_out() {
    let (_t, state) = setup("locked");
    let w = create_used(&state, "s");
    let err = resume_latest(&state).expect_err("locked");
    let ResumeError::Locked(m) = &err else {
        panic!("expected Locked, got {err:?}");
    };
    assert!(m.contains("another openmax process"), "{m}");
    assert!(m.contains(&format!("pid {}", std::process::id())), "{m}");
    assert_eq!(err.exit_code(), 1);
    drop(w);
    let r = resume_latest(&state).expect("free after the owner is gone");
    // While resumed, it is owned again.
    assert!(matches!(resume_latest(&state), Err(ResumeError::Locked(_))));
    drop(r);
    assert!(resume_latest(&state).is_ok());
}

#[test]
fn leftover_index_temp_file_does_not_break_reads() {
    let (_t, state) = setup("tempfile");
    let mut w = SessionWriter::create(&state, "s", header("s")).expect("create");
    w.append(&[msg(Message::user_text("hi"))]).expect("append");
    drop(w);
    let dir = state.sessions_dir();
    // What a writer killed between write and rename leaves behind.
    fs::write(dir.join(".index.json.tmp.99999.0"), b"{\"v\":1,\"sess").expect("write");
    let r = resume_latest(&state).expect("resume");
    assert_eq!(r.history, vec![Message::user_text("hi")]);
    drop(r);
    // And the next atomic write still works with it there.
    drop(SessionWriter::create(&state, "t", header("t")).expect("create"));
    assert_eq!(read_index(&dir).expect("index").sessions.len(), 2);
    // No temp files of ours are left behind.
    let temps: Vec<String> = fs::read_dir(&dir)
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp.") && !n.contains("99999"))
        .collect();
    assert!(temps.is_empty(), "{temps:?}");
}

#[test]
fn transcript_caps_messages_and_line_keeping_the_newest() {
    let (_t, state) = setup("caps");
    let mut w = SessionWriter::create(&state, "s", header("s")).expect("create");
    // A long multi-byte message: cut at 4096 characters on a char boundary.
    let long: String = "é".repeat(5000);
    w.append(&[msg(Message::user_text(long.clone()))])
        .expect("append");
    drop(w);
    let r = resume_latest(&state).expect("resume");
    assert!(r.transcript.truncated);
    assert_eq!(r.transcript.messages[0].content.chars().count(), 4096);
    assert_eq!(r.history[0], Message::user_text(long), "history is whole");
    drop(r);

    // 100 messages of 4000 bytes = 400,000 bytes > 256 KiB: the newest 65 fit (260,000).
    let (_t2, state) = setup("caps2");
    let mut w = create_used(&state, "s");
    for i in 0..100 {
        let text = format!("{i:04}{}", "x".repeat(3996));
        w.append(&[msg(Message::assistant_text(text))])
            .expect("append");
    }
    drop(w);
    let r = resume_latest(&state).expect("resume");
    assert!(r.transcript.truncated);
    assert_eq!(r.transcript.messages.len(), 65);
    assert!(r.transcript.messages[0].content.starts_with("0035"));
    assert!(r.transcript.messages[64].content.starts_with("0099"));
    let total: usize = r.transcript.messages.iter().map(|m| m.content.len()).sum();
    assert!(total <= 256 * 1024);
    drop(r);

    // Exactly at the cap: nothing cut.
    let (_t3, state) = setup("caps3");
    let mut w = SessionWriter::create(&state, "s", header("s")).expect("create");
    for _ in 0..64 {
        w.append(&[msg(Message::user_text("y".repeat(4096)))])
            .expect("append");
    }
    drop(w);
    let r = resume_latest(&state).expect("resume");
    assert!(!r.transcript.truncated);
    assert_eq!(r.transcript.messages.len(), 64);
    drop(r);

    // Exactly at the cap with one older message, read backwards from a compaction: the older
    // one is left out and the line says so.
    let (_t4, state) = setup("caps4");
    let mut w = SessionWriter::create(&state, "s", header("s")).expect("create");
    w.append(&[msg(Message::user_text("older"))])
        .expect("append");
    for _ in 0..64 {
        w.append(&[msg(Message::user_text("y".repeat(4096)))])
            .expect("append");
    }
    w.append(&[Record::Compaction {
        messages: vec![Message::user_text("sum")],
        tokens_before: 1,
        tokens_after: 1,
        compacted_messages: 65,
    }])
    .expect("append");
    drop(w);
    let r = resume_latest(&state).expect("resume");
    assert!(r.transcript.truncated);
    assert_eq!(r.transcript.messages.len(), 64);
    assert!(r.transcript.messages.iter().all(|m| m.content != "older"));
}

#[test]
fn transcript_before_a_compaction_is_read_backwards_and_capped() {
    let (_t, state) = setup("backwards");
    let mut w = SessionWriter::create(&state, "s", header("s")).expect("create");
    for i in 0..100 {
        let mut batch = tool_call_pair(&format!("c{i}"));
        batch.push(msg(Message::user_text(format!(
            "{i:04}{}",
            "z".repeat(3996)
        ))));
        w.append(&batch).expect("append");
    }
    w.append(&[
        Record::Compaction {
            messages: vec![Message::user_text("sum")],
            tokens_before: 1,
            tokens_after: 1,
            compacted_messages: 300,
        },
        msg(Message::assistant_text("after")),
    ])
    .expect("append");
    drop(w);
    let r = resume_latest(&state).expect("resume");
    assert_eq!(r.history.len(), 2);
    let m = &r.transcript.messages;
    assert!(r.transcript.truncated);
    assert_eq!(m.last().expect("some").content, "after");
    // The newest user messages before the compaction, interleaved with "let me look".
    assert!(m.iter().any(|x| x.content.starts_with("0099")));
    assert!(!m.iter().any(|x| x.content.starts_with("0000")));
    let total: usize = m.iter().map(|x| x.content.len()).sum();
    assert!(total <= 256 * 1024);
    // A corrupt line before the compaction point, found while reading backwards.
    drop(r);
    let path = record_path(&state, "s");
    let mut bytes = fs::read(&path).expect("record");
    // Break the line before the compaction line.
    let cpos = String::from_utf8_lossy(&bytes)
        .find("\"compaction\"")
        .expect("compaction");
    let prev_nl = bytes[..cpos].iter().rposition(|&b| b == b'\n').expect("nl");
    let prev_start = bytes[..prev_nl]
        .iter()
        .rposition(|&b| b == b'\n')
        .expect("nl")
        + 1;
    bytes[prev_start] = b'#';
    fs::write(&path, &bytes).expect("write");
    let err = resume_latest(&state).expect_err("corrupt");
    assert!(matches!(err, ResumeError::Corrupt(_)), "{err:?}");
    assert!(
        err.to_string().contains(&format!("byte {prev_start}")),
        "{err}"
    );
}

#[test]
fn concurrent_creates_keep_every_index_entry() {
    let (_t, state) = setup("concurrent");
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let state = state.clone();
            std::thread::spawn(move || {
                for i in 0..6 {
                    let id = format!("t{t}-{i}");
                    let mut w = SessionWriter::create(&state, &id, header(&id)).expect("create");
                    w.append(&[Record::Compaction {
                        messages: vec![Message::user_text(id.clone())],
                        tokens_before: 1,
                        tokens_after: 1,
                        compacted_messages: 0,
                    }])
                    .expect("append");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("thread");
    }
    let index = read_index(&state.sessions_dir()).expect("index");
    assert_eq!(index.sessions.len(), 24);
    assert!(index.sessions.iter().all(|e| e.compaction.is_some()));
}

#[test]
fn a_session_named_index_does_not_meet_the_index_lock() {
    let (_t, state) = setup("named-index");
    let mut w = create_used(&state, "index");
    w.append(&[Record::Compaction {
        messages: vec![Message::user_text("x")],
        tokens_before: 1,
        tokens_after: 1,
        compacted_messages: 0,
    }])
    .expect("append updates the index while owning index.lock");
    assert!(!w.index_lagging());
    drop(w);
    assert_eq!(resume_latest(&state).expect("resume").session_id, "index");
}

#[test]
fn the_index_counts_turns_keeps_the_first_prompt_and_skips_unused_sessions() {
    let (_t, state) = setup("used");
    let mut w = SessionWriter::create(&state, "s", header("s")).expect("create");
    let index = || read_index(&state.sessions_dir()).expect("index");
    assert_eq!(index().sessions[0].turns, Some(0));
    assert!(!index().sessions[0].used());
    w.append(&[msg(Message {
        role: Role::User,
        content: vec![
            Block::note("approval mode is now auto"),
            Block::text("first\n   prompt   here"),
        ],
    })])
    .expect("append");
    assert_eq!(
        index().sessions[0].first_prompt.as_deref(),
        Some("first prompt here"),
        "one line, without the note"
    );
    for _ in 0..2 {
        w.append(&[Record::TurnEnd {
            stop_reason: openmax_core::wire::StopReason::Provider("end_turn".into()),
            turn: None,
        }])
        .expect("append");
    }
    w.append(&[msg(Message::user_text("second prompt"))])
        .expect("append");
    let e = index().sessions[0].clone();
    assert_eq!(e.turns, Some(2));
    assert_eq!(e.first_prompt.as_deref(), Some("first prompt here"));
    drop(w);
    // A session in which nothing was sent is never the latest, even when it is newer.
    let empty = SessionWriter::create(&state, "empty", header("empty")).expect("create");
    drop(empty);
    assert_eq!(index().latest().map(|e| e.id.as_str()), Some("s"));
    assert_eq!(resume_latest(&state).expect("resume").session_id, "s");
}

#[test]
fn a_session_discarded_when_unused_leaves_nothing_behind() {
    let (_t, state) = setup("discard");
    drop(create_used(&state, "kept"));
    let mut w = SessionWriter::create(&state, "gone", header("gone")).expect("create");
    w.discard_when_unused();
    drop(w);
    let ids: Vec<String> = read_index(&state.sessions_dir())
        .expect("index")
        .sessions
        .iter()
        .map(|e| e.id.clone())
        .collect();
    assert_eq!(ids, ["kept"]);
    assert!(!record_path(&state, "gone").exists());
    assert!(!state.sessions_dir().join("gone.lock").exists());
    // With a prompt it stays.
    let mut w = SessionWriter::create(&state, "stays", header("stays")).expect("create");
    w.discard_when_unused();
    w.append(&[msg(Message::user_text("hello"))])
        .expect("append");
    drop(w);
    assert!(record_path(&state, "stays").exists());
    // So does one whose turn ended on a prompt of nothing said (whitespace alone): a turn ran.
    let mut w = SessionWriter::create(&state, "ran", header("ran")).expect("create");
    w.discard_when_unused();
    w.append(&[
        msg(Message::user_text("  ")),
        Record::TurnEnd {
            stop_reason: openmax_core::wire::StopReason::Provider("end_turn".into()),
            turn: Some(1),
        },
    ])
    .expect("append");
    assert!(!w.prompted(), "nothing was said");
    drop(w);
    assert!(record_path(&state, "ran").exists());
}

/// A turn's end counts as the session's last use from when the core asked for its record, not
/// from when the writer got to it: a session whose turn ended first and was written last is not
/// the latest. (The core's `done` does not wait for that write.)
#[test]
fn last_use_is_when_the_turn_ended_not_when_its_record_was_written() {
    let (_t, state) = setup("last-use");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let turn_end = || Record::TurnEnd {
        stop_reason: openmax_core::wire::StopReason::Provider("end_turn".into()),
        turn: Some(1),
    };
    let mut second = create_used(&state, "second");
    let mut first = create_used(&state, "first");
    // The second session was made first, its turn ended later, and its record was written
    // first.
    second
        .append_at(&[turn_end()], now + 2_000)
        .expect("append");
    first.append_at(&[turn_end()], now + 1_000).expect("append");
    let index = read_index(&state.sessions_dir()).expect("index");
    // Stamped at the write instead, or at the session's making, the other would be the latest.
    assert_eq!(index.latest().map(|e| e.id.as_str()), Some("second"));
    for e in &index.sessions {
        assert_eq!(
            e.turns,
            Some(1),
            "{}: its turn's end is in its record",
            e.id
        );
    }
}

/// The index is a file anyone with the project's state can edit: an entry that names a record
/// outside the sessions directory, or an id with a path separator, is refused as corrupt.
#[test]
fn an_index_entry_naming_a_path_is_refused_by_its_record_or_by_its_id() {
    for (record, id) in [
        ("../s.jsonl", "s"),
        ("sub/s.jsonl", "s"),
        ("/tmp/s.jsonl", "s"),
        ("s.jsonl", "a/s"),
        ("s.jsonl", "a\\s"),
    ] {
        let (_t, state) = setup("badentry");
        drop(create_used(&state, "s"));
        let index = state.sessions_dir().join("index.json");
        let mut v: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(&index).unwrap()).unwrap();
        v["sessions"][0]["record"] = record.into();
        v["sessions"][0]["id"] = id.into();
        fs::write(&index, v.to_string()).unwrap();
        match resume_latest(&state) {
            Err(ResumeError::Corrupt(m)) => {
                assert!(m.contains("names an invalid record"), "{record} {id}: {m}")
            }
            other => panic!("{record} {id}: {:?}", other.map(|_| ())),
        }
    }
    // The control: the entry as written resumes.
    let (_t, state) = setup("goodentry");
    drop(create_used(&state, "s"));
    assert!(resume_latest(&state).is_ok());
}

/// The index's first prompt, once there, is never replaced by a writer's: a session resumed
/// from an entry without one (an index written before it had them) takes the next prompt as
/// its first, unless the index got one meanwhile (a rebuild by another openmax reads the
/// record's own first prompt), which then stands.
#[test]
fn a_first_prompt_in_the_index_is_never_replaced() {
    for rebuilt_meanwhile in [false, true] {
        let (_t, state) = setup("keepfirst");
        drop(create_used(&state, "s"));
        let index = state.sessions_dir().join("index.json");
        let edit = |f: &dyn Fn(&mut serde_json::Value)| {
            let mut v: serde_json::Value =
                serde_json::from_str(&fs::read_to_string(&index).unwrap()).unwrap();
            f(&mut v["sessions"][0]);
            fs::write(&index, v.to_string()).unwrap();
        };
        // The index says the session was used (a turn ended) but knows no prompt.
        edit(&|e| {
            e["first_prompt"] = serde_json::Value::Null;
            e["turns"] = 1.into();
        });
        let mut r = resume_latest(&state).expect("resume");
        if rebuilt_meanwhile {
            edit(&|e| e["first_prompt"] = "a prompt".into());
        }
        r.writer
            .append(&[msg(Message::user_text("a later prompt"))])
            .expect("append");
        let first = read_index(&state.sessions_dir()).expect("index").sessions[0]
            .first_prompt
            .clone();
        let want = if rebuilt_meanwhile {
            "a prompt"
        } else {
            "a later prompt"
        };
        assert_eq!(first.as_deref(), Some(want), "rebuilt: {rebuilt_meanwhile}");
    }
}

/// The first prompt is a use of the session: the index's last use moves to when it was
/// written, before any turn ends (so a session killed mid-turn is still the latest one used).
#[test]
fn the_first_prompt_moves_the_sessions_last_use() {
    let (_t, state) = setup("firstuse");
    let mut w = SessionWriter::create(&state, "s", header("s")).expect("create");
    let last_use = || {
        read_index(&state.sessions_dir())
            .expect("index")
            .sessions
            .into_iter()
            .find(|e| e.id == "s")
            .expect("entry")
            .updated_ms
    };
    let created = last_use();
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64
    };
    // The clock past the creation's millisecond.
    let later = loop {
        let t = now();
        if t > created {
            break t;
        }
        std::thread::yield_now();
    };
    w.append(&[msg(Message::user_text("a prompt"))])
        .expect("append");
    assert!(last_use() >= later, "{} < {later}", last_use());
}

fn compaction(summary: &str) -> Record {
    Record::Compaction {
        messages: vec![Message::user_text(summary)],
        tokens_before: 1,
        tokens_after: 1,
        compacted_messages: 1,
    }
}

/// Lines are numbered from the record's first line whether resume starts at the index's
/// compaction point or reads the whole record: a torn last line is named by the same number.
#[test]
fn a_torn_line_is_named_by_its_line_in_the_record_with_and_without_the_hint() {
    let (_t, state) = setup("torn-after-hint");
    let dir = state.sessions_dir();
    let mut w = SessionWriter::create(&state, "s", header("s")).expect("create");
    w.append(&[msg(Message::user_text("q0"))]).expect("append");
    w.append(&[compaction("sum")]).expect("append");
    w.append(&[msg(Message::user_text("q1"))]).expect("append");
    drop(w);
    let hint = read_index(&dir).expect("index").sessions[0].compaction;
    assert_eq!(hint.map(|cp| cp.line), Some(3), "the compaction is line 3");
    for with_hint in [true, false] {
        rewrite_index(&dir, |index| {
            index.sessions[0].compaction = if with_hint { hint } else { None };
        });
        // Line 5: a write cut short.
        let mut f = fs::OpenOptions::new()
            .append(true)
            .open(dir.join("s.jsonl"))
            .expect("record");
        f.write_all(br#"{"v":1,"type":"mess"#).expect("torn line");
        drop(f);
        let r = resume_latest(&state).expect("resume");
        assert_eq!(
            r.history,
            vec![Message::user_text("sum"), Message::user_text("q1")]
        );
        assert_eq!(r.notices.len(), 1, "{:?}", r.notices);
        assert!(
            r.notices[0].contains("torn last line 5 ("),
            "hint {with_hint}: {}",
            r.notices[0]
        );
    }
}

/// A compaction may be the record's first line after the header (line 2); the index's hint at
/// it is used.
#[test]
fn a_hint_at_line_2_is_used_and_one_at_line_1_is_not() {
    let (_t, state) = setup("hint-line-2");
    let dir = state.sessions_dir();
    let mut w = SessionWriter::create(&state, "s", header("s")).expect("create");
    w.append(&[compaction("sum")]).expect("append");
    w.append(&[msg(Message::user_text("q1"))]).expect("append");
    drop(w);
    let cp = read_index(&dir).expect("index").sessions[0]
        .compaction
        .expect("hint");
    assert_eq!(cp.line, 2);
    for (line, used) in [(2, true), (1, false)] {
        rewrite_index(&dir, |index| {
            index.sessions[0].compaction =
                Some(openmax_shell::session::index::CompactionPoint { line, ..cp });
        });
        let r = openmax_shell::session::resume_id(&state, "s").expect("resume");
        assert_eq!(
            r.history,
            vec![Message::user_text("sum"), Message::user_text("q1")]
        );
        assert_eq!(r.notices.is_empty(), used, "line {line}: {:?}", r.notices);
    }
}

/// Every project with a sessions directory under the home, in the order of their state
/// directories; a directory without one is not a project's state.
#[test]
fn all_projects_lists_each_project_with_sessions_once_in_order() {
    let t = TempDir::new("all-projects");
    let home = Home::new(t.0.join("home"));
    assert!(openmax_shell::session::list::all_projects(&home).is_empty());
    let mut dirs = Vec::new();
    for name in ["b", "a", "c"] {
        let project = t.0.join(name);
        fs::create_dir_all(&project).expect("project");
        let state = ProjectState::open(&home, &project);
        drop(create_used(&state, "s"));
        dirs.push(state.dir().to_path_buf());
    }
    fs::create_dir_all(home.root().join("projects").join("stray")).expect("stray");
    dirs.sort();
    let listed: Vec<PathBuf> = openmax_shell::session::list::all_projects(&home)
        .iter()
        .map(|s| s.dir().to_path_buf())
        .collect();
    assert_eq!(listed, dirs);
}

/// The terminal's prompt history is the project's own, inside its state directory.
#[test]
fn the_prompt_history_is_a_file_of_the_projects_state() {
    let (_t, state) = setup("history");
    let history = state.prompt_history();
    assert_eq!(history.parent(), Some(state.dir()));
    assert_eq!(history.file_name().unwrap(), "prompt-history.jsonl");
}

/// An index that cannot be written leaves the compaction point pending (the record has it);
/// the next append writes it.
#[test]
fn a_compaction_point_the_index_could_not_take_is_written_at_the_next_append() {
    let (_t, state) = setup("index-lag");
    let dir = state.sessions_dir();
    let mut w = create_used(&state, "s");
    let index_file = dir.join("index.json");
    let saved = fs::read(&index_file).expect("index");
    fs::remove_file(&index_file).expect("remove");
    fs::create_dir_all(index_file.join("in-the-way")).expect("a directory in its place");
    w.append(&[compaction("sum")])
        .expect("the record takes the compaction");
    assert!(w.index_lagging());
    fs::remove_dir_all(&index_file).expect("remove");
    fs::write(&index_file, saved).expect("restore");
    assert_eq!(
        read_index(&dir).expect("index").sessions[0].compaction,
        None
    );
    w.append(&[msg(Message::user_text("q1"))]).expect("append");
    assert!(!w.index_lagging());
    let cp = read_index(&dir).expect("index").sessions[0].compaction;
    assert_eq!(cp.map(|cp| cp.line), Some(3));
}

/// A session id is 1 to 128 of `[A-Za-z0-9._-]`, not starting with a dot: every part of the
/// rule refuses on its own.
#[test]
fn a_session_id_is_taken_by_each_part_of_its_rule() {
    let (_t, state) = setup("ids");
    let longest = "a".repeat(128);
    for id in ["a", "A.b-c_9", "x.", longest.as_str()] {
        let made = SessionWriter::create(&state, id, header(id));
        assert!(made.is_ok(), "{id:?}: {:?}", made.err());
    }
    let too_long = "a".repeat(129);
    for id in ["", ".x", "..", too_long.as_str(), "a/b", "a b", "é", "a\0"] {
        assert!(
            matches!(
                SessionWriter::create(&state, id, header(id)),
                Err(StoreError::Invalid(_))
            ),
            "{id:?}"
        );
    }
}

/// An index written before openmax recorded the project's path (no `project` field), listed
/// from the state directory alone (`sessions --all`, where the path is not known): the
/// project is read from the first record's header.
#[test]
fn an_older_index_without_the_project_takes_it_from_the_first_records_header() {
    let t = TempDir::new("older-index");
    let home = Home::new(t.0.join("home"));
    let project = t.0.join("proj");
    fs::create_dir_all(&project).expect("project");
    let state = ProjectState::open(&home, &project);
    drop(create_used(&state, "s"));
    rewrite_index(&state.sessions_dir(), |i| i.project = None);
    let listed = openmax_shell::session::list::all_projects(&home);
    assert_eq!(listed.len(), 1);
    assert!(listed[0].known_project().is_none());
    let rows = openmax_shell::session::list::rows(&listed[0]).expect("rows");
    assert_eq!(rows.len(), 1);
    assert_eq!(
        rows[0].project.as_deref(),
        Some("/p"),
        "the header's project"
    );
}

/// A middle line cut short (its JSON ends before the object does) is corrupt, and the error
/// says where in that line the JSON ended, not a place past its newline.
#[test]
fn a_line_cut_short_in_the_middle_is_corrupt_where_it_ends() {
    let (_t, state) = setup("cut-short");
    drop(create_used(&state, "s"));
    let path = record_path(&state, "s");
    append_raw(&path, b"{\"v\":1,\"rec\":\"message\"\n");
    let next = RecordLine::new(msg(Message::user_text("three"))).to_json();
    append_raw(&path, format!("{next}\n").as_bytes());
    let err = resume_latest(&state).expect_err("corrupt");
    let ResumeError::Corrupt(m) = &err else {
        panic!("expected Corrupt, got {err:?}");
    };
    assert!(
        m.contains("line 3 is corrupt") && m.contains("at line 1 column 22"),
        "{m}"
    );
}
