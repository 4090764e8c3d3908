//! The `transcript` line of a continued session, gathered with bounded memory.
//!
//! Which messages: `message` records only (never a compaction's rewritten messages, which
//! repeat or summarize earlier records), user messages that carry no tool result and
//! assistant messages, each shown as its text blocks joined (harness notes, which ride in user
//! messages, left out: they are never shown as the person's words); messages with no text are
//! skipped.
//!
//! Invariants:
//! - Only the newest messages that can appear in the line are kept: once the kept messages'
//!   capped sizes exceed the 256 KiB content cap, older ones could not be shown and are neither
//!   kept nor read.
//! - Each kept message's text is cut to 4097 characters, one more than the wire cap, so
//!   [`Transcript::capped`] still sees that it must cut it and sets `truncated`.
//! - The part of the record before the resume point is read backwards from that point, in
//!   chunks, and at most [`BACKWARD_BUDGET`] bytes of it; if the budget runs out before the
//!   start of the record, the line is marked `truncated` (older messages were not looked at).

use std::collections::VecDeque;
use std::fs::File;
use std::os::unix::fs::FileExt;

use openmax_core::conversation::{Block, Message, Role};
use openmax_core::wire::handshake::{TRANSCRIPT_CONTENT_BYTES, TRANSCRIPT_MESSAGE_CHARS};
use openmax_core::wire::{Transcript, TranscriptMessage};

use super::line::{parse_text_view, TextView};

/// At most this many bytes before the resume point are read for the transcript (64 MiB).
pub const BACKWARD_BUDGET: u64 = 64 << 20;

/// Read-backwards chunk size.
const CHUNK: usize = 1 << 20;

/// The newest transcript messages, in chronological order.
#[derive(Debug, Default)]
pub(crate) struct TranscriptTail {
    kept: VecDeque<(TranscriptMessage, usize)>,
    bytes: usize,
    incomplete: bool,
}

impl TranscriptTail {
    /// Whether no older message could make it into the line.
    pub fn full(&self) -> bool {
        self.bytes > TRANSCRIPT_CONTENT_BYTES
    }

    /// A message newer than all kept ones (forward reading).
    pub fn push_newer(&mut self, message: &Message) {
        let Some((m, size)) = transcript_message(message) else {
            return;
        };
        self.kept.push_back((m, size));
        self.bytes += size;
        while self.kept.len() > 1 {
            let front = self.kept.front().map(|(_, s)| *s).unwrap_or(0);
            if self.bytes - front > TRANSCRIPT_CONTENT_BYTES {
                self.kept.pop_front();
                self.bytes -= front;
            } else {
                break;
            }
        }
    }

    /// Read the record backwards from `end` down to `floor` (both on line boundaries), adding
    /// older messages until full, the floor, or the byte budget. Errors name the byte offset.
    pub fn read_backwards(&mut self, file: &File, floor: u64, end: u64) -> Result<(), String> {
        self.read_backwards_with(file, floor, end, CHUNK, BACKWARD_BUDGET)
    }

    fn read_backwards_with(
        &mut self,
        file: &File,
        floor: u64,
        end: u64,
        chunk: usize,
        mut budget: u64,
    ) -> Result<(), String> {
        let mut read_pos = end;
        // Bytes region[read_pos .. unprocessed end], always ending in a newline or empty.
        let mut tail: Vec<u8> = Vec::new();
        while !self.full() {
            if read_pos == floor {
                // What is left is the region's first line.
                if let Some(line) = tail.strip_suffix(b"\n") {
                    self.line(line, floor)?;
                }
                return Ok(());
            }
            if budget == 0 {
                self.incomplete = true;
                return Ok(());
            }
            // A line longer than a chunk grows the read geometrically (linear time overall).
            let n = (read_pos - floor)
                .min(chunk.max(tail.len()) as u64)
                .min(budget) as usize;
            let mut buf = vec![0u8; n + tail.len()];
            let start = read_pos - n as u64;
            file.read_exact_at(&mut buf[..n], start)
                .map_err(|e| format!("cannot read at byte {start}: {e}"))?;
            buf[n..].copy_from_slice(&tail);
            read_pos = start;
            budget -= n as u64;
            // Complete lines are those preceded by a newline inside buf.
            let mut e = buf.len();
            while e > 0 && !self.full() {
                let Some(k) = buf[..e - 1].iter().rposition(|&b| b == b'\n') else {
                    break;
                };
                self.line(&buf[k + 1..e - 1], read_pos + k as u64 + 1)?;
                e = k + 1;
            }
            buf.truncate(e);
            tail = buf;
        }
        Ok(())
    }

    /// The `transcript` line: [`Transcript::capped`] over the kept messages, `truncated` also
    /// when older messages were not read.
    pub fn finish(self, session_id: &str) -> Transcript {
        let messages: Vec<TranscriptMessage> = self.kept.into_iter().map(|(m, _)| m).collect();
        let mut t = Transcript::capped(session_id, &messages);
        t.truncated |= self.incomplete;
        t
    }

    fn line(&mut self, bytes: &[u8], offset: u64) -> Result<(), String> {
        let view = parse_text_view(bytes)
            .map_err(|e| format!("corrupt line at byte {offset}: {}", e.message()))?;
        if self.full() {
            return Ok(());
        }
        if let Some((m, size)) = view.and_then(transcript_view) {
            self.kept.push_front((m, size));
            self.bytes += size;
        }
        Ok(())
    }
}

/// The transcript form of a message with its capped size, or `None` if it shows nothing.
fn transcript_message(message: &Message) -> Option<(TranscriptMessage, usize)> {
    transcript_view(TextView {
        role: message.role,
        has_tool_result: message
            .content
            .iter()
            .any(|b| matches!(b, Block::ToolResult { .. })),
        text: message.said_text(),
    })
}

/// [`transcript_message`] from a light parse.
fn transcript_view(view: TextView) -> Option<(TranscriptMessage, usize)> {
    let role = match view.role {
        Role::User if view.has_tool_result => return None,
        Role::User => "user",
        Role::Assistant => "assistant",
    };
    let text = view.text;
    if text.is_empty() {
        return None;
    }
    let keep = cut_at_chars(&text, TRANSCRIPT_MESSAGE_CHARS + 1);
    let size = cut_at_chars(&text, TRANSCRIPT_MESSAGE_CHARS).len();
    Some((
        TranscriptMessage {
            role: role.to_string(),
            content: keep.to_string(),
        },
        size,
    ))
}

fn cut_at_chars(s: &str, chars: usize) -> &str {
    match s.char_indices().nth(chars) {
        Some((cut, _)) => &s[..cut],
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openmax_core::record::{Record, RecordLine};
    use std::io::Write;

    /// Reading forward keeps only the newest messages the line can show: exactly the ones
    /// whose capped sizes, after the oldest kept, stay within the cap (so memory is bounded
    /// however long the session).
    #[test]
    fn reading_forward_keeps_only_what_the_line_can_show() {
        let mut tail = TranscriptTail::default();
        let size = 4000;
        let fit = TRANSCRIPT_CONTENT_BYTES / size;
        for i in 0..10 * fit {
            tail.push_newer(&Message::assistant_text(format!(
                "{i:05}{}",
                "x".repeat(size - 5)
            )));
            // One over the cap is kept (it may still show, cut), no more.
            assert!(
                tail.kept.len() <= fit + 1,
                "{} kept after {i}",
                tail.kept.len()
            );
            assert_eq!(tail.bytes, tail.kept.iter().map(|(_, s)| s).sum::<usize>());
        }
        assert!(tail.full());
        let newest = tail.kept.back().unwrap();
        assert!(newest
            .0
            .content
            .starts_with(&format!("{:05}", 10 * fit - 1)));
        // Exactly at the cap nothing is dropped: the cap's worth of messages, all kept.
        let mut tail = TranscriptTail::default();
        for _ in 0..TRANSCRIPT_CONTENT_BYTES / 4096 {
            tail.push_newer(&Message::user_text("y".repeat(4096)));
        }
        assert_eq!(tail.bytes, TRANSCRIPT_CONTENT_BYTES);
        assert_eq!(tail.kept.len(), TRANSCRIPT_CONTENT_BYTES / 4096);
        assert!(!tail.full());
    }

    /// A user message that carries tool results is the tools' answer, not the person's words:
    /// never shown, whatever text rides along with it.
    #[test]
    fn a_user_message_with_a_tool_result_is_never_shown() {
        let mut tail = TranscriptTail::default();
        tail.push_newer(&Message {
            role: Role::User,
            content: vec![
                Block::ToolResult {
                    id: "c1".into(),
                    ok: true,
                    output: "listing".into(),
                },
                Block::text("and a word beside it"),
            ],
        });
        assert!(tail.kept.is_empty(), "{:?}", tail.kept);
        tail.push_newer(&Message::user_text("my own words"));
        assert_eq!(tail.kept.len(), 1);
    }

    /// Reading backwards in any chunk size keeps exactly what reading forward keeps.
    #[test]
    fn backwards_equals_forwards_for_every_chunk_size() {
        let mut messages = Vec::new();
        let mut seed = 7u64;
        for i in 0..300 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let len = (seed >> 33) as usize % 3000;
            let text = format!("{i}:{}", "é".repeat(len));
            messages.push(match i % 3 {
                0 => Message::user_text(text),
                1 => Message::assistant_text(text),
                _ => Message {
                    role: Role::User,
                    content: vec![Block::ToolResult {
                        id: "c".into(),
                        ok: true,
                        output: text,
                    }],
                },
            });
        }
        let path = crate::scratch::path("tail");
        let mut f = File::create(&path).expect("temp file");
        let prefix = b"{\"header\":1}\n";
        f.write_all(prefix).expect("write");
        for m in &messages {
            let line = RecordLine::new(Record::Message { message: m.clone() }).to_json();
            writeln!(f, "{line}").expect("write");
        }
        drop(f);
        let file = File::open(&path).expect("open");
        let end = file.metadata().expect("meta").len();
        let mut forward = TranscriptTail::default();
        for m in &messages {
            forward.push_newer(m);
        }
        let expect = forward.finish("s");
        assert!(expect.truncated);
        for chunk in [1, 2, 3, 7, 64, 1000, 4096, 100_000, 1 << 20] {
            let mut back = TranscriptTail::default();
            back.read_backwards_with(&file, prefix.len() as u64, end, chunk, u64::MAX)
                .expect("reads");
            assert_eq!(back.finish("s"), expect, "chunk {chunk}");
        }
        // A small prefix of everything: all messages, nothing truncated.
        let mut small = TranscriptTail::default();
        let tenth_end = {
            let bytes = std::fs::read(&path).expect("read");
            let mut n = 0;
            let mut pos = 0;
            for (i, b) in bytes.iter().enumerate() {
                if *b == b'\n' {
                    n += 1;
                    if n == 11 {
                        pos = i + 1;
                        break;
                    }
                }
            }
            pos as u64
        };
        small
            .read_backwards_with(&file, prefix.len() as u64, tenth_end, 5, u64::MAX)
            .expect("reads");
        let t = small.finish("s");
        assert_eq!(t.messages.len(), 7);
        // Out of budget before the floor: truncated.
        let mut cut = TranscriptTail::default();
        cut.read_backwards_with(&file, prefix.len() as u64, tenth_end, 5, 100)
            .expect("reads");
        assert!(cut.finish("s").truncated);
        let _ = std::fs::remove_file(&path);
    }
}
