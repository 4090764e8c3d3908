//! One pure, incremental Server-Sent Events decoder (the WHATWG "event stream interpretation").
//!
//! Feed it the body's bytes in chunks of any size with [`SseDecoder::feed`]; it returns every
//! event completed by that chunk. Invariants:
//! - The result does not depend on where the chunks are split (a boundary may fall inside a
//!   UTF-8 sequence or between `\r` and `\n`): bytes are kept until a line ends, and only then
//!   decoded (invalid UTF-8 becomes U+FFFD, as the spec says, and the event is marked
//!   [`SseEvent::damage`]: the APIs we read send UTF-8 JSON, so such bytes mean a damaged
//!   stream, which the mappers never pass as a finished reply).
//! - Lines end with CRLF, LF or a lone CR. A UTF-8 BOM at the very start of the stream is
//!   dropped. Lines starting with `:` are comments and ignored.
//! - Fields: `event` (the type, `"message"` when absent), `data` (several `data` lines are
//!   joined with `\n`), `id` (the last event id; it persists across events, a value with NUL is
//!   ignored), `retry` (ASCII digits only; read with [`SseDecoder::retry_ms`]). Unknown fields are
//!   ignored. A field with no colon has an empty value; one space after the colon is dropped.
//! - An event is dispatched at a blank line, and only if at least one `data` line was seen.
//! - End of stream ([`SseDecoder::finish`]): the spec discards an event that was not ended by a
//!   blank line. We call `finish` only on a *clean* end of the body (never after an aborted
//!   socket), and treat that end as a final line ending plus blank line, so a server that closes
//!   right after `data: [DONE]` (no blank line, or no newline at all) still delivers it. A
//!   truncated JSON payload that this lets through fails to parse in the mapping, which fails
//!   the stream.
//! - Memory: a line longer than [`MAX_LINE_BYTES`] is dropped whole (up to its line ending), and
//!   so is a `data` line that would take its event's data past that cap, so a hostile server
//!   cannot grow the buffers without bound; the event is still dispatched, marked
//!   [`SseEvent::damage`].

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event` field, or `"message"` when the event had none.
    pub event: String,
    /// The `data` lines joined with `\n`.
    pub data: String,
    /// The last event id seen so far in the stream (`id` persists across events).
    pub id: Option<String>,
    /// Why the event cannot be trusted (a line of it was not valid UTF-8, or was over
    /// [`MAX_LINE_BYTES`] and dropped), or `None`. The mappers fail the stream on it.
    pub damage: Option<&'static str>,
}

impl Default for SseDecoder {
    fn default() -> Self {
        SseDecoder::new()
    }
}

/// The longest line kept; a longer one is skipped up to its line ending.
pub const MAX_LINE_BYTES: usize = 32 * 1024 * 1024;

/// The incremental decoder. See the module docs for the exact rules.
#[derive(Debug, Clone)]
pub struct SseDecoder {
    /// Bytes of the current, unfinished line.
    line: Vec<u8>,
    /// The line being collected is over the cap and is being skipped.
    skipping: bool,
    /// The previous chunk ended with `\r`: a leading `\n` of the next chunk belongs to it.
    after_cr: bool,
    /// No line has ended yet (the BOM check applies to the first line only).
    first_line: bool,
    event_type: String,
    data: String,
    data_seen: bool,
    /// Why the event being collected is damaged, if it is.
    damage: Option<&'static str>,
    last_id: Option<String>,
    retry: Option<u64>,
}

impl SseDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> SseDecoder {
        SseDecoder {
            line: Vec::new(),
            skipping: false,
            after_cr: false,
            first_line: true,
            event_type: String::new(),
            data: String::new(),
            data_seen: false,
            damage: None,
            last_id: None,
            retry: None,
        }
    }

    /// Feed the next chunk of the body; returns the events it completed, in order.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        let mut out = Vec::new();
        let mut rest = chunk;
        if self.after_cr && !rest.is_empty() {
            self.after_cr = false;
            if let Some((&b'\n', tail)) = rest.split_first() {
                rest = tail;
            }
        }
        while !rest.is_empty() {
            match rest.iter().position(|&b| b == b'\n' || b == b'\r') {
                Some(pos) => {
                    self.push_bytes(&rest[..pos]);
                    let was_cr = rest[pos] == b'\r';
                    rest = &rest[pos + 1..];
                    if was_cr {
                        match rest.first() {
                            Some(b'\n') => rest = &rest[1..],
                            Some(_) => {}
                            None => self.after_cr = true,
                        }
                    }
                    self.end_line(&mut out);
                }
                None => {
                    self.push_bytes(rest);
                    rest = &[];
                }
            }
        }
        out
    }

    /// The body ended cleanly: flush a last line and event not ended by a blank line.
    /// Call only on a clean end (see the module docs); the decoder is reset afterwards.
    pub fn finish(&mut self) -> Vec<SseEvent> {
        let mut out = Vec::new();
        if !self.line.is_empty() || self.skipping {
            self.end_line(&mut out);
        }
        self.dispatch(&mut out);
        let retry = self.retry;
        *self = SseDecoder::new();
        self.retry = retry;
        out
    }

    /// The reconnection time the stream asked for with a `retry` field, in ms.
    pub fn retry_ms(&self) -> Option<u64> {
        self.retry
    }

    fn push_bytes(&mut self, bytes: &[u8]) {
        if self.skipping {
            return;
        }
        if self.line.len() + bytes.len() > MAX_LINE_BYTES {
            self.skipping = true;
            self.line.clear();
            return;
        }
        self.line.extend_from_slice(bytes);
    }

    fn end_line(&mut self, out: &mut Vec<SseEvent>) {
        let mut bytes = std::mem::take(&mut self.line);
        let skipped = std::mem::replace(&mut self.skipping, false);
        if self.first_line {
            self.first_line = false;
            if bytes.starts_with(&[0xEF, 0xBB, 0xBF]) {
                bytes.drain(..3);
            }
        }
        if skipped {
            // The dropped line may have carried data: the event must not pass as whole.
            self.damage = Some("a line over the 32 MiB cap was dropped");
            self.data_seen = true;
            return;
        }
        if bytes.is_empty() {
            self.dispatch(out);
            return;
        }
        let line = String::from_utf8_lossy(&bytes);
        if matches!(line, std::borrow::Cow::Owned(_)) && !line.starts_with(':') {
            self.damage = Some("a line is not valid UTF-8");
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.find(':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(' ').unwrap_or(v))
            }
            None => (&line[..], ""),
        };
        match field {
            "event" => self.event_type = value.to_string(),
            "data" => {
                self.data_seen = true;
                if self.data.len() + value.len() + 1 > MAX_LINE_BYTES {
                    // An event's data is held to the line cap too: many data lines with no
                    // blank line cannot grow it without bound. The event is damaged.
                    self.damage = Some("an event's data over the 32 MiB cap was dropped");
                    return;
                }
                self.data.push_str(value);
                self.data.push('\n');
            }
            "id" if !value.contains('\0') => self.last_id = Some(value.to_string()),
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                // An overlong number is ignored, keeping the previous value.
                self.retry = value.parse().ok().or(self.retry);
            }
            _ => {}
        }
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        let event_type = std::mem::take(&mut self.event_type);
        let mut data = std::mem::take(&mut self.data);
        let damage = self.damage.take();
        if !std::mem::replace(&mut self.data_seen, false) {
            return;
        }
        if data.ends_with('\n') {
            data.pop();
        }
        out.push(SseEvent {
            event: if event_type.is_empty() {
                "message".to_string()
            } else {
                event_type
            },
            data,
            id: self.last_id.clone().filter(|s| !s.is_empty()),
            damage,
        });
    }
}

/// Decode a whole body at once (feed + finish): for tests and the demo provider.
pub fn decode_all(body: &[u8]) -> Vec<SseEvent> {
    let mut d = SseDecoder::new();
    let mut out = d.feed(body);
    out.extend(d.finish());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use quickcheck::{QuickCheck, TestResult};

    fn ev(event: &str, data: &str) -> SseEvent {
        SseEvent {
            event: event.into(),
            data: data.into(),
            id: None,
            damage: None,
        }
    }

    #[test]
    fn named_events_and_default_type() {
        let evs = decode_all(b"event: ping\ndata: {}\n\ndata: hi\n\n");
        assert_eq!(evs, vec![ev("ping", "{}"), ev("message", "hi")]);
    }

    #[test]
    fn multi_line_data_joined_with_newline() {
        let evs = decode_all(b"data: a\ndata:b\ndata:  c\n\n");
        assert_eq!(evs, vec![ev("message", "a\nb\n c")]);
    }

    #[test]
    fn comments_and_unknown_fields_ignored() {
        let evs = decode_all(b": OPENROUTER PROCESSING\n\nfoo: bar\ndata: x\n: mid\n\n");
        assert_eq!(evs, vec![ev("message", "x")]);
    }

    #[test]
    fn crlf_cr_and_lf_line_endings() {
        let evs = decode_all(b"data: a\r\n\r\ndata: b\r\rdata: c\n\n");
        assert_eq!(
            evs,
            vec![ev("message", "a"), ev("message", "b"), ev("message", "c")]
        );
    }

    #[test]
    fn cr_lf_split_across_chunks_is_one_line_ending() {
        let mut d = SseDecoder::new();
        let mut evs = d.feed(b"data: a\r");
        evs.extend(d.feed(b"\n\r"));
        evs.extend(d.feed(b"\ndata: b\n\n"));
        assert_eq!(evs, vec![ev("message", "a"), ev("message", "b")]);
    }

    #[test]
    fn utf8_split_inside_a_sequence() {
        let body = "data: héllo ✓\n\n".as_bytes();
        let mut d = SseDecoder::new();
        let mut evs = Vec::new();
        for b in body {
            evs.extend(d.feed(std::slice::from_ref(b)));
        }
        assert_eq!(evs, vec![ev("message", "héllo ✓")]);
    }

    #[test]
    fn bom_at_start_is_dropped_even_split() {
        let mut d = SseDecoder::new();
        let mut evs = d.feed(&[0xEF, 0xBB]);
        evs.extend(d.feed(&[0xBF]));
        evs.extend(d.feed(b"event: x\ndata: 1\n\n"));
        assert_eq!(evs, vec![ev("x", "1")]);
    }

    #[test]
    fn id_persists_and_nul_id_ignored() {
        let evs = decode_all(b"id: 7\ndata: a\n\ndata: b\n\nid: 8\0\ndata: c\n\nid\ndata: d\n\n");
        let ids: Vec<_> = evs.iter().map(|e| e.id.clone()).collect();
        assert_eq!(
            ids,
            vec![Some("7".into()), Some("7".into()), Some("7".into()), None]
        );
    }

    #[test]
    fn retry_field_digits_only() {
        let mut d = SseDecoder::new();
        d.feed(b"retry: 3000\n\n");
        assert_eq!(d.retry_ms(), Some(3000));
        d.feed(b"retry: 12a\n\n");
        assert_eq!(d.retry_ms(), Some(3000));
        // A sign is no digit, though Rust's integer parsing takes `+`.
        d.feed(b"retry: +5\n\n");
        assert_eq!(d.retry_ms(), Some(3000));
        d.feed(b"retry:\n\n");
        assert_eq!(d.retry_ms(), Some(3000));
    }

    #[test]
    fn event_without_data_is_not_dispatched() {
        let evs = decode_all(b"event: x\n\ndata\n\n");
        // `data` with no colon is a data line with an empty value: dispatched, empty.
        assert_eq!(evs, vec![ev("message", "")]);
    }

    #[test]
    fn finish_flushes_a_trailing_event_without_blank_line() {
        let mut d = SseDecoder::new();
        assert!(d.feed(b"data: [DONE]").is_empty());
        assert_eq!(d.finish(), vec![ev("message", "[DONE]")]);
        let mut d = SseDecoder::new();
        assert!(d.feed(b"data: [DONE]\n").is_empty());
        assert_eq!(d.finish(), vec![ev("message", "[DONE]")]);
        assert!(d.finish().is_empty());
    }

    #[test]
    fn a_line_of_32_mib_is_kept_whole() {
        // The documented cap: a tool call's arguments may come as one data line this long.
        let value = "x".repeat((32 << 20) - "data: ".len());
        let mut d = SseDecoder::new();
        let evs = d.feed(format!("data: {value}\n\n").as_bytes());
        assert_eq!(evs.len(), 1);
        assert_eq!(evs[0].damage, None);
        assert_eq!(evs[0].data.len(), value.len());
    }

    #[test]
    fn over_long_line_is_dropped_and_its_event_marked_damaged() {
        let mut d = SseDecoder::new();
        let big = vec![b'x'; MAX_LINE_BYTES + 10];
        let mut body = b"data: ".to_vec();
        body.extend_from_slice(&big);
        let mut evs = d.feed(&body);
        // Not held while its end is awaited, even when it came in one piece.
        assert!(d.line.len() <= MAX_LINE_BYTES, "held {}", d.line.len());
        evs.extend(d.feed(b"\n\ndata: ok\n\n"));
        assert_eq!(
            evs.len(),
            2,
            "{:?}",
            evs.iter().map(|e| e.damage).collect::<Vec<_>>()
        );
        assert!(evs[0].damage.unwrap().contains("32 MiB"));
        assert_eq!(evs[0].data, "");
        assert_eq!(evs[1], ev("message", "ok"));
    }

    #[test]
    fn many_data_lines_without_a_blank_line_stay_within_the_cap() {
        let mut d = SseDecoder::new();
        let line = format!("data: {}\n", "x".repeat(1 << 20));
        for _ in 0..(MAX_LINE_BYTES >> 20) + 8 {
            assert!(d.feed(line.as_bytes()).is_empty());
            assert!(d.data.len() <= MAX_LINE_BYTES, "held {}", d.data.len());
        }
        let evs = d.feed(b"\ndata: ok\n\n");
        assert_eq!(evs.len(), 2);
        assert!(
            evs[0].damage.unwrap().contains("32 MiB"),
            "{:?}",
            evs[0].damage
        );
        assert!(evs[0].data.len() <= MAX_LINE_BYTES);
        assert_eq!(evs[1], ev("message", "ok"));
    }

    /// An event's data, each line with its newline, may hold exactly the cap; a byte more and
    /// the event is damaged.
    #[test]
    fn an_events_data_holds_exactly_the_cap_and_not_a_byte_more() {
        let half = MAX_LINE_BYTES / 2;
        for (second, damaged) in [(half - 1, false), (half, true)] {
            let mut d = SseDecoder::new();
            let mut evs = d.feed(
                format!(
                    "data: {}
",
                    "a".repeat(half - 1)
                )
                .as_bytes(),
            );
            evs.extend(
                d.feed(
                    format!(
                        "data: {}

",
                        "b".repeat(second)
                    )
                    .as_bytes(),
                ),
            );
            assert_eq!(evs.len(), 1);
            assert_eq!(evs[0].damage.is_some(), damaged, "{second}");
            if !damaged {
                assert_eq!(evs[0].data.len() + 1, MAX_LINE_BYTES);
            }
        }
    }

    #[test]
    fn invalid_utf8_marks_the_event_damaged_and_only_that_event() {
        let evs = decode_all(b"data: {\"t\":\"a\xff\"}\n\n: \xfe comment\ndata: ok\n\n");
        assert_eq!(evs.len(), 2);
        assert_eq!(evs[0].damage, Some("a line is not valid UTF-8"));
        assert_eq!(evs[0].data, "{\"t\":\"a\u{fffd}\"}");
        assert_eq!(evs[1], ev("message", "ok"), "a bad comment damages nothing");
    }

    fn split_feed(body: &[u8], cuts: &[usize]) -> Vec<SseEvent> {
        let mut points: Vec<usize> = cuts
            .iter()
            .map(|c| {
                if body.is_empty() {
                    0
                } else {
                    c % (body.len() + 1)
                }
            })
            .collect();
        points.sort_unstable();
        let mut d = SseDecoder::new();
        let mut out = Vec::new();
        let mut start = 0;
        for p in points {
            out.extend(d.feed(&body[start..p]));
            start = p;
        }
        out.extend(d.feed(&body[start..]));
        out.extend(d.finish());
        out
    }

    /// Splitting a stream at arbitrary points gives the same events as feeding it whole.
    #[test]
    fn prop_split_points_do_not_change_events() {
        fn prop(pieces: Vec<(u8, String)>, cuts: Vec<usize>, bom: bool) -> TestResult {
            // Build a stream out of field-ish pieces with mixed line endings.
            let mut body = Vec::new();
            if bom {
                body.extend_from_slice(&[0xEF, 0xBB, 0xBF]);
            }
            for (sel, text) in &pieces {
                let text: String = text.chars().filter(|c| *c != '\r' && *c != '\n').collect();
                let line = match sel % 6 {
                    0 => format!("data: {text}"),
                    1 => format!("event: {text}"),
                    2 => format!(": {text}"),
                    3 => format!("id: {text}"),
                    4 => "retry: 10".to_string(),
                    _ => String::new(),
                };
                body.extend_from_slice(line.as_bytes());
                body.extend_from_slice(match sel / 6 % 3 {
                    0 => b"\n".as_slice(),
                    1 => b"\r\n".as_slice(),
                    _ => b"\r".as_slice(),
                });
            }
            let whole = split_feed(&body, &[]);
            TestResult::from_bool(split_feed(&body, &cuts) == whole)
        }
        QuickCheck::new()
            .tests(500)
            .quickcheck(prop as fn(Vec<(u8, String)>, Vec<usize>, bool) -> TestResult);
    }

    /// Byte-at-a-time feeding equals whole feeding on arbitrary bytes (incl. invalid UTF-8).
    #[test]
    fn prop_bytewise_equals_whole_on_any_bytes() {
        fn prop(body: Vec<u8>) -> bool {
            let mut d = SseDecoder::new();
            let mut out = Vec::new();
            for b in &body {
                out.extend(d.feed(std::slice::from_ref(b)));
            }
            out.extend(d.finish());
            out == decode_all(&body)
        }
        QuickCheck::new()
            .tests(500)
            .quickcheck(prop as fn(Vec<u8>) -> bool);
    }
}
