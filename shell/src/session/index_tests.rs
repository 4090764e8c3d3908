//! Every branch of the session index ([`super::index`]), its rebuild from the records
//! ([`super::rebuild`]) and its read-modify-write ([`super::index_write`]), on record files
//! written here: which sessions are used, which is the latest (last use, ties to the later
//! entry), how a bad index file reads (missing, unreadable, not JSON, no or another version,
//! the wrong shape), which records a rebuild lists (a record whose header names another
//! session, that has no header or cannot be read is never trusted, nor deleted), in what order,
//! with what it summarizes, and what `repair` keeps of a readable old index.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

use openmax_core::conversation::{Block, Message, Role};
use openmax_core::record::{Record, RecordLine};
use openmax_core::wire::StopReason;

use super::index::{
    one_line, read_index, CompactionPoint, Index, IndexEntry, IndexError, FIRST_PROMPT_CHARS,
    INDEX_VERSION,
};
use super::index_write::update_index;
use super::rebuild::{repair, scan_records, summarize};

struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn dir() -> Dir {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = crate::scratch::path(&format!("index-{n}"));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    Dir(d)
}

fn entry(id: &str, updated_ms: u64, turns: Option<u64>, prompt: Option<&str>) -> IndexEntry {
    IndexEntry {
        id: id.to_string(),
        created_ms: 1,
        updated_ms,
        record: format!("{id}.jsonl"),
        compaction: None,
        turns,
        first_prompt: prompt.map(str::to_string),
    }
}

fn index(sessions: Vec<IndexEntry>) -> Index {
    Index {
        v: INDEX_VERSION,
        project: Some("/p".into()),
        sessions,
    }
}

fn line(record: Record) -> String {
    let mut s = serde_json::to_string(&RecordLine::new(record)).unwrap();
    s.push('\n');
    s
}

fn header(id: &str) -> String {
    line(Record::Session {
        session_id: id.to_string(),
        project: "/p".to_string(),
        system: "sys".to_string(),
        tools: Vec::new(),
    })
}

fn user(text: &str) -> String {
    line(Record::Message {
        message: Message::user_text(text),
    })
}

fn turn_end() -> String {
    line(Record::TurnEnd {
        stop_reason: StopReason::Provider("end_turn".into()),
        turn: None,
    })
}

/// Write `sessions/<file>` with `text`, last modified at `ms`.
fn record(d: &Path, file: &str, text: &str, ms: u64) {
    let p = d.join(file);
    fs::write(&p, text).unwrap();
    let f = fs::File::options().write(true).open(&p).unwrap();
    f.set_modified(UNIX_EPOCH + Duration::from_millis(ms))
        .unwrap();
}

fn ids(i: &Index) -> Vec<&str> {
    i.sessions.iter().map(|e| e.id.as_str()).collect()
}

// ---- index.rs --------------------------------------------------------------------------------

#[test]
fn a_session_is_used_once_a_prompt_was_admitted_or_when_an_older_openmax_did_not_say() {
    assert!(entry("a", 1, Some(0), Some("hi")).used(), "a prompt");
    assert!(entry("a", 1, Some(2), None).used(), "turns");
    assert!(entry("a", 1, None, None).used(), "an older entry");
    assert!(!entry("a", 1, Some(0), None).used(), "nothing sent");
}

#[test]
fn the_latest_is_the_used_session_used_last_ties_to_the_later_entry() {
    let i = index(vec![
        entry("old-but-used-last", 50, Some(1), None),
        entry("a", 10, Some(1), None),
        entry("empty-newest", 99, Some(0), None),
        entry("tie-first", 40, Some(1), None),
        entry("tie-second", 40, Some(1), None),
    ]);
    let order: Vec<&str> = i.newest_first().iter().map(|e| e.id.as_str()).collect();
    assert_eq!(order, ["old-but-used-last", "tie-second", "tie-first", "a"]);
    assert_eq!(i.latest().unwrap().id, "old-but-used-last");
    assert!(index(vec![entry("e", 5, Some(0), None)]).latest().is_none());
    assert!(index(Vec::new()).latest().is_none());
}

#[test]
fn a_first_prompt_is_one_line_cut_on_a_char_boundary() {
    assert_eq!(one_line("  fix\n\tthe   bug \n"), "fix the bug");
    let long = "é".repeat(FIRST_PROMPT_CHARS + 5);
    let cut = one_line(&long);
    assert_eq!(cut.chars().count(), FIRST_PROMPT_CHARS + 1);
    assert!(cut.ends_with('…'));
    let exact = "x".repeat(FIRST_PROMPT_CHARS);
    assert_eq!(one_line(&exact), exact);
}

#[test]
fn a_bad_index_file_reads_as_what_is_wrong_with_it() {
    let d = dir();
    let p = d.0.join("index.json");
    assert!(matches!(read_index(&d.0), Err(IndexError::Missing)));
    fs::create_dir(&p).unwrap();
    assert!(
        matches!(read_index(&d.0), Err(IndexError::Io(_))),
        "a directory"
    );
    fs::remove_dir(&p).unwrap();
    for (text, says) in [
        ("{ not json", "is corrupt"),
        ("{\"sessions\": []}", "no version field"),
        ("{\"v\": 99, \"sessions\": []}", "unknown version 99"),
        ("{\"v\": 1, \"sessions\": 3}", "is corrupt"),
        ("{\"v\": 1}", "is corrupt"),
    ] {
        fs::write(&p, text).unwrap();
        match read_index(&d.0) {
            Err(IndexError::Corrupt(m)) => assert!(m.contains(says), "{text}: {m}"),
            other => panic!("{text}: {other:?}"),
        }
    }
    let good = index(vec![entry("a", 5, Some(1), Some("hi"))]);
    fs::write(&p, serde_json::to_vec(&good).unwrap()).unwrap();
    assert_eq!(read_index(&d.0).unwrap(), good);
}

// ---- rebuild.rs ------------------------------------------------------------------------------

#[test]
fn a_rebuild_lists_only_records_whose_header_names_them() {
    let d = dir();
    record(
        &d.0,
        "b.jsonl",
        &format!("{}{}{}", header("b"), user("second"), turn_end()),
        2_000,
    );
    record(
        &d.0,
        "a.jsonl",
        &format!("{}{}{}", header("a"), user("first"), turn_end()),
        1_000,
    );
    record(&d.0, "c.jsonl", &header("c"), 2_000);
    // Another session's record under this name: not trusted.
    record(&d.0, "mallory.jsonl", &header("a"), 3_000);
    // No header first.
    record(
        &d.0,
        "nohead.jsonl",
        &format!("{}{}", user("x"), header("nohead")),
        3_000,
    );
    record(&d.0, "empty.jsonl", "", 3_000);
    record(&d.0, "garbage.jsonl", "{ not json\n", 3_000);
    // Not records at all.
    record(&d.0, "notes.txt", &header("notes"), 3_000);
    record(&d.0, ".hidden.jsonl", &header(".hidden"), 3_000);
    record(&d.0, ".jsonl", &header(""), 3_000);
    fs::create_dir(d.0.join("dir.jsonl")).unwrap();

    let (i, notices) = scan_records(&d.0).unwrap();
    // By last modification, then id.
    assert_eq!(ids(&i), ["a", "b", "c"]);
    assert_eq!(i.project.as_deref(), Some("/p"));
    let a = &i.sessions[0];
    assert_eq!((a.created_ms, a.updated_ms), (1_000, 1_000));
    assert_eq!(
        (a.turns, a.first_prompt.as_deref()),
        (Some(1), Some("first"))
    );
    assert_eq!(a.record, "a.jsonl");
    assert_eq!(a.compaction, None, "hints are not recovered");
    assert!(!i.sessions[2].used(), "c: no prompt");
    let said = notices.join("\n");
    for (file, why) in [
        ("mallory.jsonl", "names session \"a\", not \"mallory\""),
        ("nohead.jsonl", "does not start with a session header"),
        ("empty.jsonl", "does not start with a session header"),
        ("garbage.jsonl", "does not start with a session header"),
        ("dir.jsonl", "could not be read"),
    ] {
        assert!(
            notices.iter().any(|n| n.contains(file) && n.contains(why)),
            "{file}: {why}:\n{said}"
        );
    }
    assert_eq!(notices.len(), 5, "{said}");
    // Nothing is deleted.
    assert!(d.0.join("mallory.jsonl").exists() && d.0.join("garbage.jsonl").exists());
}

#[test]
fn a_rebuild_of_no_sessions_directory_is_an_empty_index() {
    let d = dir();
    let (i, notices) = scan_records(&d.0.join("sessions")).unwrap();
    assert!(i.sessions.is_empty() && notices.is_empty() && i.project.is_none());
}

#[test]
fn a_summary_counts_turns_and_takes_the_first_real_prompt() {
    let d = dir();
    let tool_result = line(Record::Message {
        message: Message {
            role: Role::User,
            content: vec![Block::ToolResult {
                id: "c".into(),
                ok: true,
                output: "out".into(),
            }],
        },
    });
    let text = format!(
        "{}{}{}{}not json\n{}{}{}",
        header("s"),
        tool_result,
        user("   "),
        line(Record::Message {
            message: Message {
                role: Role::Assistant,
                content: vec![Block::text("assistant words")],
            },
        }),
        user("the  real\nprompt"),
        turn_end(),
        turn_end(),
    );
    record(&d.0, "s.jsonl", &text, 1);
    assert_eq!(
        summarize(&d.0.join("s.jsonl")).unwrap(),
        (2, Some("the real prompt".to_string()))
    );
}

#[test]
fn repair_keeps_what_a_readable_old_index_knew() {
    let d = dir();
    record(
        &d.0,
        "a.jsonl",
        &format!("{}{}{}", header("a"), user("one"), turn_end()),
        5_000,
    );
    record(
        &d.0,
        "b.jsonl",
        &format!("{}{}{}", header("b"), user("two"), turn_end()),
        6_000,
    );
    record(&d.0, "x.jsonl", &header("y"), 7_000);
    let point = CompactionPoint {
        offset: 10,
        line: 2,
        refrozen_offset: None,
        mode: None,
    };
    let mut old_a = entry("a", 9_000, Some(1), Some("one"));
    old_a.created_ms = 100;
    old_a.compaction = Some(point);
    let mut old_b = entry("b", 10, Some(1), Some("two"));
    old_b.created_ms = 200;
    let gone = entry("gone", 1, Some(1), Some("no record"));
    let mut old = index(vec![old_a, old_b, gone]);
    old.project = Some("/old".into());
    fs::write(d.0.join("index.json"), serde_json::to_vec(&old).unwrap()).unwrap();

    let report = repair(&d.0).unwrap();
    assert!(
        report.contains("2 session record(s)") && report.contains("the old index was readable"),
        "{report}"
    );
    assert!(
        report.contains("skipped: ") && report.contains("x.jsonl"),
        "{report}"
    );
    let i = read_index(&d.0).unwrap();
    assert_eq!(ids(&i), ["a", "b"], "a session without a record is dropped");
    let (a, b) = (&i.sessions[0], &i.sessions[1]);
    assert_eq!(
        (a.created_ms, a.updated_ms, a.compaction),
        (100, 9_000, Some(point))
    );
    assert_eq!(
        (b.created_ms, b.updated_ms, b.compaction),
        (200, 6_000, None)
    );
    assert_eq!(
        i.project.as_deref(),
        Some("/p"),
        "the records' project first"
    );
}

#[test]
fn repair_sets_a_corrupt_index_aside_and_says_so() {
    let d = dir();
    record(
        &d.0,
        "a.jsonl",
        &format!("{}{}", header("a"), user("one")),
        5_000,
    );
    fs::write(d.0.join("index.json"), "{ not json").unwrap();
    let report = repair(&d.0).unwrap();
    assert!(
        report.contains("the old index was corrupt") && report.contains("kept as"),
        "{report}"
    );
    assert_eq!(ids(&read_index(&d.0).unwrap()), ["a"]);
    assert_eq!(aside(&d.0), ["{ not json"]);

    fs::remove_file(d.0.join("index.json")).unwrap();
    let report = repair(&d.0).unwrap();
    assert!(report.contains("the old index was missing"), "{report}");

    let none = dir();
    let report = repair(&none.0.join("sessions")).unwrap();
    assert!(report.contains("nothing to repair"), "{report}");
}

/// The contents of the `index.json.corrupt-*` files of `d`.
fn aside(d: &Path) -> Vec<String> {
    fs::read_dir(d)
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("index.json.corrupt-")
        })
        .map(|e| fs::read_to_string(e.path()).unwrap())
        .collect()
}

// ---- index_write.rs --------------------------------------------------------------------------

#[test]
fn an_update_rebuilds_a_missing_or_corrupt_index_first() {
    let d = dir();
    record(
        &d.0,
        "a.jsonl",
        &format!("{}{}", header("a"), user("one")),
        5_000,
    );
    record(&d.0, "mallory.jsonl", &header("a"), 6_000);
    // Missing: rebuilt from the records, then changed.
    update_index(&d.0, "new", |i| {
        i.sessions.push(entry("new", 7_000, Some(0), None))
    })
    .unwrap();
    assert_eq!(ids(&read_index(&d.0).unwrap()), ["a", "new"]);
    // Readable: only changed.
    update_index(&d.0, "new", |i| i.sessions[1].turns = Some(1)).unwrap();
    assert_eq!(read_index(&d.0).unwrap().sessions[1].turns, Some(1));
    assert!(aside(&d.0).is_empty());
    // Corrupt: set aside, rebuilt (the entry of a session without a record is gone), changed.
    fs::write(d.0.join("index.json"), "[]").unwrap();
    update_index(&d.0, "a", |i| i.sessions[0].updated_ms = 8_000).unwrap();
    let i = read_index(&d.0).unwrap();
    assert_eq!(ids(&i), ["a"]);
    assert_eq!(i.sessions[0].updated_ms, 8_000);
    assert_eq!(aside(&d.0), ["[]"]);
    // Unreadable: an error, nothing written.
    fs::remove_file(d.0.join("index.json")).unwrap();
    fs::create_dir(d.0.join("index.json")).unwrap();
    assert!(update_index(&d.0, "a", |_| {}).is_err());
}
