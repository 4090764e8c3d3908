//! A session's history as it happened, for the terminal UI of a resumed session: the person's
//! prompts, the replies, one line per tool call (its name, what it was called on, whether it
//! succeeded, the `+added -removed` of a file edit), and how each turn that did not end
//! normally ended (cancelled, truncated, an error). Read from the record's `message` and
//! `turn_end` lines (a compaction's rewritten messages are not shown again).
//!
//! Invariants: memory and time are bounded by [`TAIL_BYTES`]: a longer record is read from that
//! far before its end (from the next line), and the history says older parts are not shown;
//! a line that does not parse is skipped (this only shows, the resume itself judges the
//! record); harness notes are never shown as the person's words.

use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::Path;

use openmax_core::conversation::{Block, Role};
use openmax_core::record::Record;

use super::line::parse_line;

/// At most this much of the end of a record is read (16 MiB).
pub const TAIL_BYTES: u64 = 16 << 20;

/// At most this many items are kept (the newest).
pub const MAX_ITEMS: usize = 400;

/// One thing that happened.
#[derive(Debug, Clone, PartialEq)]
pub enum Past {
    /// A prompt (or a hook's refusal reason sent as one).
    User(String),
    /// Reply text (Markdown).
    Reply(String),
    /// A tool call and how it ended (`None`: no result was recorded, the turn was cut).
    Tool {
        name: String,
        /// Its string arguments, each cut to 200 characters (what the call was on).
        args: serde_json::Map<String, serde_json::Value>,
        ok: Option<bool>,
        /// `+added -removed` of a file tool's edit.
        counts: Option<(u64, u64)>,
    },
    /// A turn that did not end normally: its stop reason (`cancelled`, `max_iterations`, …).
    Ended(String),
}

/// The history of the record at `path`: the items, and whether older ones were left out.
pub fn read(path: &Path) -> std::io::Result<(Vec<Past>, bool)> {
    let mut file = File::open(path)?;
    let len = file.metadata()?.len();
    let mut older = false;
    let mut reader = if len > TAIL_BYTES {
        older = true;
        file.seek(SeekFrom::Start(len - TAIL_BYTES))?;
        let mut r = BufReader::with_capacity(1 << 20, file);
        let mut skip = Vec::new();
        r.read_until(b'\n', &mut skip)?;
        r
    } else {
        BufReader::with_capacity(1 << 20, file)
    };
    let mut items: Vec<Past> = Vec::new();
    let mut line = Vec::new();
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            break;
        }
        let Some(bytes) = line.strip_suffix(b"\n") else {
            break;
        };
        let Ok(parsed) = parse_line(bytes) else {
            continue;
        };
        match parsed.record {
            Record::Message { message } => apply(&mut items, message),
            Record::TurnEnd { stop_reason, .. } => {
                let r = stop_reason.as_str().to_string();
                if !matches!(r.as_str(), "end_turn" | "tool_use" | "stop") {
                    items.push(Past::Ended(r));
                }
            }
            Record::Session { .. }
            | Record::Compaction { .. }
            | Record::Refrozen { .. }
            | Record::ModeChanged { .. }
            | Record::Checkpoint { .. } => {}
        }
    }
    if items.len() > MAX_ITEMS {
        items.drain(..items.len() - MAX_ITEMS);
        older = true;
    }
    tidy(&mut items);
    Ok((items, older))
}

fn apply(items: &mut Vec<Past>, message: openmax_core::conversation::Message) {
    match message.role {
        Role::User => {
            let said = message.said_text();
            for b in &message.content {
                if let Block::ToolResult { id, ok, output } = b {
                    settle(items, id, *ok, output);
                }
            }
            let has_result = message
                .content
                .iter()
                .any(|b| matches!(b, Block::ToolResult { .. }));
            if !has_result && !said.trim().is_empty() {
                items.push(Past::User(said));
            }
        }
        Role::Assistant => {
            for b in message.content {
                match b {
                    Block::Text { text } if !text.trim().is_empty() => {
                        items.push(Past::Reply(text));
                    }
                    Block::ToolUse { id, name, input } => {
                        items.push(Past::Tool {
                            name,
                            args: small_args(&input, &id),
                            ok: None,
                            counts: None,
                        });
                    }
                    _ => {}
                }
            }
        }
    }
}

/// The call id rides in the arguments map under a key no tool uses, until its result comes.
const CALL_KEY: &str = "\u{0}call_id";

fn small_args(input: &serde_json::Value, id: &str) -> serde_json::Map<String, serde_json::Value> {
    let mut out = serde_json::Map::new();
    if let Some(obj) = input.as_object() {
        for (k, v) in obj {
            if let Some(s) = v.as_str() {
                let cut: String = s.chars().take(200).collect();
                out.insert(k.clone(), serde_json::Value::String(cut));
            }
        }
    }
    out.insert(CALL_KEY.into(), serde_json::Value::String(id.to_string()));
    out
}

/// Mark the call `id` ended.
fn settle(items: &mut [Past], id: &str, ok_now: bool, output: &str) {
    for item in items.iter_mut().rev() {
        if let Past::Tool {
            args, ok, counts, ..
        } = item
        {
            if args.get(CALL_KEY).and_then(|v| v.as_str()) == Some(id) {
                args.remove(CALL_KEY);
                *ok = Some(ok_now);
                *counts = edit_counts(output);
                return;
            }
        }
    }
}

/// `(+a -r)` as a file tool reports its edit on its first line.
fn edit_counts(output: &str) -> Option<(u64, u64)> {
    let first = output.lines().next()?;
    let open = first.rfind("(+")?;
    let inner = first[open + 2..].strip_suffix(')')?;
    let (a, r) = inner.split_once(" -")?;
    Some((a.parse().ok()?, r.parse().ok()?))
}

/// Drop the call ids still riding in calls that never got a result.
fn tidy(items: &mut [Past]) {
    for item in items {
        if let Past::Tool { args, .. } = item {
            args.remove(CALL_KEY);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openmax_core::conversation::Message;
    use openmax_core::record::RecordLine;
    use openmax_core::wire::StopReason;
    use std::io::Write;

    fn line(f: &mut File, record: Record) {
        let l = RecordLine {
            v: openmax_core::record::RECORD_VERSION,
            record,
        };
        writeln!(f, "{}", serde_json::to_string(&l).unwrap()).unwrap();
    }

    #[test]
    fn the_newest_items_are_kept_and_older_is_said_only_when_some_were_left_out() {
        let dir = crate::scratch::path("replay-cap");
        std::fs::create_dir_all(&dir).unwrap();
        for (n, older) in [(MAX_ITEMS, false), (MAX_ITEMS + 1, true)] {
            let path = dir.join(format!("{n}.jsonl"));
            let mut f = File::create(&path).unwrap();
            for i in 0..n {
                line(
                    &mut f,
                    Record::Message {
                        message: Message {
                            role: Role::User,
                            content: vec![Block::text(format!("prompt {i}"))],
                        },
                    },
                );
            }
            drop(f);
            let (items, said) = read(&path).unwrap();
            assert_eq!(said, older, "{n} items");
            assert_eq!(items.len(), MAX_ITEMS, "{n} items");
            assert_eq!(
                items[MAX_ITEMS - 1],
                Past::User(format!("prompt {}", n - 1))
            );
            assert_eq!(items[0], Past::User(format!("prompt {}", n - MAX_ITEMS)));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A record of exactly [`TAIL_BYTES`] is read whole; one byte more and it is read from its
    /// tail (the first, cut line skipped) and says older items were left out.
    #[test]
    fn a_record_is_read_whole_up_to_the_tail_size_and_from_its_tail_past_it() {
        let dir = crate::scratch::path("replay-tail");
        std::fs::create_dir_all(&dir).unwrap();
        let user = |text: String| Record::Message {
            message: Message {
                role: Role::User,
                content: vec![Block::text(text)],
            },
        };
        for extra in [0u64, 1] {
            let path = dir.join(format!("{extra}.jsonl"));
            let mut f = File::create(&path).unwrap();
            line(&mut f, user("first".into()));
            let first = f.metadata().unwrap().len();
            let empty = {
                let mut probe = File::create(dir.join("probe")).unwrap();
                line(&mut probe, user(String::new()));
                probe.metadata().unwrap().len()
            };
            let fill = TAIL_BYTES - first - empty + extra;
            line(&mut f, user("x".repeat(fill as usize)));
            drop(f);
            assert_eq!(std::fs::metadata(&path).unwrap().len(), TAIL_BYTES + extra);
            let (items, older) = read(&path).unwrap();
            assert_eq!(older, extra == 1, "{extra} byte(s) past");
            let firsts = items
                .iter()
                .filter(|i| **i == Past::User("first".into()))
                .count();
            assert_eq!(firsts, 1 - extra as usize, "{extra} byte(s) past");
            assert!(
                matches!(items.last(), Some(Past::User(t)) if t.len() as u64 == fill),
                "{extra}"
            );
        }
        // Well past the size: only what lies in the last TAIL_BYTES is read (the long line
        // that starts before them is cut and skipped), not the record from near its start.
        let path = dir.join("long.jsonl");
        let mut f = File::create(&path).unwrap();
        line(&mut f, user("first".into()));
        line(&mut f, user("m".repeat(TAIL_BYTES as usize)));
        line(&mut f, user("last".into()));
        drop(f);
        assert_eq!(
            read(&path).unwrap(),
            (vec![Past::User("last".into())], true)
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_turn_with_a_tool_an_edit_and_a_cancel_reads_back_as_it_happened() {
        let dir = crate::scratch::path("replay");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.jsonl");
        let mut f = File::create(&path).unwrap();
        line(
            &mut f,
            Record::Session {
                session_id: "s".into(),
                project: "/p".into(),
                system: "sys".into(),
                tools: vec![],
            },
        );
        let user = |content: Vec<Block>| Record::Message {
            message: Message {
                role: Role::User,
                content,
            },
        };
        let assistant = |content: Vec<Block>| Record::Message {
            message: Message {
                role: Role::Assistant,
                content,
            },
        };
        line(
            &mut f,
            user(vec![
                Block::note("approval mode is now auto"),
                Block::text("fix it"),
            ]),
        );
        line(
            &mut f,
            assistant(vec![
                Block::text("Looking."),
                Block::ToolUse {
                    id: "c1".into(),
                    name: "edit_file".into(),
                    input: serde_json::json!({"path": "a.rs", "old_string": "x", "new_string": "y"}),
                },
            ]),
        );
        line(
            &mut f,
            user(vec![Block::ToolResult {
                id: "c1".into(),
                ok: true,
                output: "edited a.rs: replaced 1 place (+2 -1)".into(),
            }]),
        );
        line(
            &mut f,
            assistant(vec![Block::ToolUse {
                id: "c2".into(),
                name: "shell".into(),
                input: serde_json::json!({"command": "sleep 100"}),
            }]),
        );
        line(
            &mut f,
            Record::TurnEnd {
                stop_reason: StopReason::Cancelled,
                turn: None,
            },
        );
        drop(f);
        let (items, older) = read(&path).unwrap();
        assert!(!older);
        let args = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), serde_json::Value::String(v.to_string())))
                .collect::<serde_json::Map<_, _>>()
        };
        assert_eq!(
            items,
            vec![
                Past::User("fix it".into()),
                Past::Reply("Looking.".into()),
                Past::Tool {
                    name: "edit_file".into(),
                    args: args(&[("path", "a.rs"), ("old_string", "x"), ("new_string", "y")]),
                    ok: Some(true),
                    counts: Some((2, 1)),
                },
                Past::Tool {
                    name: "shell".into(),
                    args: args(&[("command", "sleep 100")]),
                    ok: None,
                    counts: None,
                },
                Past::Ended("cancelled".into()),
            ]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
