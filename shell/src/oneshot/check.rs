//! `openmax --check --stdio`: validate a JSONL event stream read from stdin.
//!
//! Interface (kept stable for `main.rs`): [`run`] reads `input` to its end, writes one report
//! line per input line to `out`, and returns the process exit code (0 when every line holds).
//!
//! Report format: `<n>: ok` or `<n>: <violation>[; <violation>…]` for each input line, then
//! `end: <violation>` for each end-of-stream violation, then one `summary:` line.
//!
//! Invariants: memory is bounded whatever the input. Lines are framed by a bounded reader: a
//! line longer than [`MAX_CHECK_LINE`] is reported and skipped to the next newline without being
//! buffered; bytes that are not UTF-8 are reported, never a panic. The validator itself keeps
//! only open ids and counters (see [`openmax_core::validate::stream`]).

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};

use openmax_core::validate::{LineReport, StreamValidator};

/// The longest line `--check` will buffer and parse (16 MiB), newline excluded.
pub const MAX_CHECK_LINE: usize = 16 * 1024 * 1024;

/// Validate the stream on `input`, reporting to `out`; returns the exit code.
pub fn run<R: Read, W: Write>(input: R, out: W) -> i32 {
    let mut reader = BufReader::with_capacity(1 << 20, input);
    let mut report = Reporter {
        out: std::io::BufWriter::with_capacity(1 << 16, out),
        failed: false,
        num: Vec::with_capacity(24),
    };
    let mut v = StreamValidator::new();
    // The part of the current line read so far, when it spans reads.
    let mut partial: Vec<u8> = Vec::new();
    // Length so far of a line past the cap (it is skipped, not buffered).
    let mut overlong: Option<u64> = None;
    let mut read_error = None;
    loop {
        let chunk = match reader.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => {
                read_error = Some(e.to_string());
                break;
            }
        };
        if chunk.is_empty() {
            // End of input: a last line without a newline still counts.
            if let Some(len) = overlong.take() {
                report.line(&v.feed_unreadable(&too_long(len)));
            } else if !partial.is_empty() {
                report.line(&v.feed(&partial));
            }
            break;
        }
        match find_newline(chunk) {
            Some(pos) => {
                if let Some(len) = overlong.take() {
                    report.line(&v.feed_unreadable(&too_long(len + pos as u64)));
                } else if partial.is_empty() {
                    report.line(&v.feed(&chunk[..pos]));
                } else if partial.len() + pos > MAX_CHECK_LINE {
                    let len = (partial.len() + pos) as u64;
                    report.line(&v.feed_unreadable(&too_long(len)));
                    partial = Vec::new();
                } else {
                    partial.extend_from_slice(&chunk[..pos]);
                    report.line(&v.feed(&partial));
                    if partial.capacity() > 1 << 20 {
                        partial = Vec::new();
                    } else {
                        partial.clear();
                    }
                }
                reader.consume(pos + 1);
            }
            None => {
                let len = chunk.len();
                if let Some(seen) = overlong.as_mut() {
                    *seen += len as u64;
                } else if partial.len() + len > MAX_CHECK_LINE {
                    overlong = Some((partial.len() + len) as u64);
                    partial = Vec::new();
                } else {
                    partial.extend_from_slice(chunk);
                }
                reader.consume(len);
            }
        }
        if report.failed {
            // The report cannot be written (a closed pipe): stop reading.
            return 1;
        }
    }
    let mut end = v.finish();
    if let Some(e) = read_error {
        end.insert(
            0,
            openmax_core::validate::Violation {
                at: openmax_core::validate::Where::End,
                message: format!("reading the input failed ({e}); the stream is incomplete"),
            },
        );
    }
    for e in &end {
        report.text(&format!("end: {}\n", e.message));
    }
    let lines = v.lines();
    let summary = if end.is_empty() && v.bad_lines() == 0 {
        format!("summary: {lines} lines, every rule holds\n")
    } else {
        format!(
            "summary: {lines} lines, {} with violations, {} end-of-stream violations\n",
            v.bad_lines(),
            end.len()
        )
    };
    report.text(&summary);
    let _ = report.out.flush();
    if end.is_empty() && v.bad_lines() == 0 {
        0
    } else {
        1
    }
}

fn too_long(len: u64) -> String {
    format!(
        "line is longer than the {} MiB limit ({len} bytes); skipped to the next newline",
        MAX_CHECK_LINE >> 20
    )
}

/// The first `\n` in `b`, eight bytes at a time.
fn find_newline(b: &[u8]) -> Option<usize> {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    const NL: u64 = LO * b'\n' as u64;
    let mut i = 0;
    while i + 8 <= b.len() {
        let mut word = [0u8; 8];
        word.copy_from_slice(&b[i..i + 8]);
        let x = u64::from_le_bytes(word) ^ NL;
        // Nonzero exactly when some byte of `x` is zero, i.e. a byte of the word is `\n`.
        if x.wrapping_sub(LO) & !x & HI != 0 {
            break;
        }
        i += 8;
    }
    b[i..].iter().position(|&c| c == b'\n').map(|p| p + i)
}

/// Writes report lines; remembers a write failure instead of panicking.
struct Reporter<W: Write> {
    out: std::io::BufWriter<W>,
    failed: bool,
    num: Vec<u8>,
}

impl<W: Write> Reporter<W> {
    fn line(&mut self, r: &LineReport) {
        self.num.clear();
        push_u64(&mut self.num, r.line);
        let res = if r.is_ok() {
            self.num.extend_from_slice(b": ok\n");
            self.out.write_all(&self.num)
        } else {
            self.num.extend_from_slice(b": ");
            let msgs: Vec<&str> = r.violations.iter().map(|v| v.message.as_str()).collect();
            let mut s = msgs.join("; ");
            s.push('\n');
            self.out
                .write_all(&self.num)
                .and_then(|_| self.out.write_all(s.as_bytes()))
        };
        if res.is_err() {
            self.failed = true;
        }
    }

    fn text(&mut self, s: &str) {
        if self.out.write_all(s.as_bytes()).is_err() {
            self.failed = true;
        }
    }
}

/// Append the decimal digits of `n`.
fn push_u64(out: &mut Vec<u8>, mut n: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    const HELLO: &str = r#"{"type":"hello","proto":"openmax-stdio/6","protocol_version":6,"session_id":"s1","version":"0.2.0","project":"/p","continued":false}"#;

    fn check(input: &[u8]) -> (i32, String) {
        let mut out = Vec::new();
        let code = run(input, &mut out);
        (code, String::from_utf8(out).expect("the report is UTF-8"))
    }

    /// A reader of `hello`, one `len`-byte line of `x` (no JSON), then a valid turn.
    struct HugeLine {
        head: Vec<u8>,
        left: u64,
        tail: Vec<u8>,
        stage: u8,
        pos: usize,
    }

    impl Read for HugeLine {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            loop {
                let piece: &[u8] = match self.stage {
                    0 => &self.head,
                    1 => {
                        if self.left == 0 {
                            self.stage = 2;
                            continue;
                        }
                        let n = (buf.len() as u64).min(self.left) as usize;
                        buf[..n].fill(b'x');
                        self.left -= n as u64;
                        return Ok(n);
                    }
                    2 => &self.tail,
                    _ => return Ok(0),
                };
                if self.pos == piece.len() {
                    self.stage += 1;
                    self.pos = 0;
                    continue;
                }
                let n = (piece.len() - self.pos).min(buf.len());
                buf[..n].copy_from_slice(&piece[self.pos..self.pos + n]);
                self.pos += n;
                return Ok(n);
            }
        }
    }

    fn corpus(dir: &str) -> Vec<std::path::PathBuf> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../core/tests/corpus")
            .join(dir);
        let mut v: Vec<_> = std::fs::read_dir(root)
            .expect("the corpus exists")
            .map(|e| e.expect("entry").path())
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn the_corpus_through_check_exits_as_expected_and_names_line_and_rule() {
        let valid = corpus("valid");
        assert!(valid.len() >= 10);
        for path in valid {
            let (code, report) = check(&std::fs::read(&path).expect("readable"));
            assert_eq!(code, 0, "{}: {report}", path.display());
        }
        let invalid = corpus("invalid");
        assert!(invalid.len() >= 40);
        for path in invalid {
            let expect = std::fs::read_to_string(path.with_extension("expect")).expect("sidecar");
            let (at, rule) = expect.trim().split_once(": ").expect("`<line>: <rule>`");
            let (code, report) = check(&std::fs::read(&path).expect("readable"));
            assert_eq!(code, 1, "{}: {report}", path.display());
            let prefix = format!("{at}: ");
            assert!(
                report
                    .lines()
                    .any(|l| l.starts_with(&prefix) && l.contains(rule)),
                "{}: wanted {expect:?} in\n{report}",
                path.display()
            );
        }
    }

    #[test]
    fn a_valid_stream_reports_ok_per_line_and_exits_zero() {
        let input = format!(
            "{HELLO}\n{}\n{}\n{}\n",
            r#"{"session_id":"s1","type":"token","text":"hi"}"#,
            r#"{"session_id":"s1","type":"message_done","text":"hi"}"#,
            r#"{"session_id":"s1","type":"done","stop_reason":"stop"}"#
        );
        let (code, report) = check(input.as_bytes());
        assert_eq!(code, 0, "{report}");
        assert_eq!(
            report,
            "1: ok\n2: ok\n3: ok\n4: ok\nsummary: 4 lines, every rule holds\n"
        );
    }

    #[test]
    fn a_violation_names_the_line_and_the_rule() {
        let input = format!(
            "{HELLO}\n{}\n{}",
            r#"{"session_id":"s1","type":"tool_end","call_id":"c9","ok":true,"output":""}"#,
            r#"{"session_id":"s1","type":"done","stop_reason":"stop"}"#
        );
        let (code, report) = check(input.as_bytes());
        assert_eq!(code, 1);
        assert!(
            report.contains("2: tool_end names call_id \"c9\" that no tool_start opened"),
            "{report}"
        );
        assert!(
            report.contains("3: ok"),
            "a last line without a newline counts: {report}"
        );
        assert!(
            report.ends_with("summary: 3 lines, 1 with violations, 0 end-of-stream violations\n")
        );
    }

    #[test]
    fn an_empty_stream_is_a_violation() {
        let (code, report) = check(b"");
        assert_eq!(code, 1);
        assert!(
            report.starts_with("end: empty stream: there is no hello line"),
            "{report}"
        );
        assert!(
            report.ends_with("summary: 0 lines, 0 with violations, 1 end-of-stream violations\n")
        );
    }

    #[test]
    fn invalid_utf8_is_reported_and_the_stream_goes_on() {
        let mut input = format!("{HELLO}\n").into_bytes();
        input.extend_from_slice(
            b"{\"session_id\":\"s1\",\"type\":\"token\",\"text\":\"\xff\xfe\"}\n",
        );
        input.extend_from_slice(b"\xc3\n");
        input.extend_from_slice(br#"{"session_id":"s1","type":"done","stop_reason":"stop"}"#);
        input.push(b'\n');
        let (code, report) = check(&input);
        assert_eq!(code, 1);
        assert!(
            report.contains("2: not valid UTF-8 (invalid byte at offset 42)"),
            "{report}"
        );
        assert!(
            report.contains("3: not valid UTF-8 (invalid byte at offset 0)"),
            "{report}"
        );
        assert!(report.contains("4: ok"), "{report}");
    }

    #[test]
    fn a_100_mib_line_is_reported_and_skipped_without_buffering() {
        let len: u64 = 100 << 20;
        let input = HugeLine {
            head: format!("{HELLO}\n").into_bytes(),
            left: len,
            tail: br#"
{"session_id":"s1","type":"done","stop_reason":"stop"}
"#
            .to_vec(),
            stage: 0,
            pos: 0,
        };
        let mut out = Vec::new();
        let code = run(input, &mut out);
        let report = String::from_utf8(out).expect("UTF-8");
        assert_eq!(code, 1);
        assert!(
            report.contains(&format!(
                "2: line is longer than the 16 MiB limit ({len} bytes); skipped to the next newline"
            )),
            "{report}"
        );
        assert!(
            report.contains("3: ok"),
            "the reader resynchronizes: {report}"
        );
    }

    #[test]
    fn a_line_at_the_cap_is_still_checked() {
        // Exactly 16 MiB: buffered and parsed (it is not JSON), not reported as too long.
        let mut input = format!("{HELLO}\n").into_bytes();
        input.extend(std::iter::repeat_n(b' ', MAX_CHECK_LINE - 2));
        input.extend_from_slice(b"{}\n");
        let (code, report) = check(&input);
        assert_eq!(code, 1);
        assert!(
            report.contains("2: no \"type\" field"),
            "{}",
            &report[..report.len().min(300)]
        );
    }

    #[test]
    fn find_newline_agrees_with_a_plain_scan() {
        for len in 0..40 {
            for nl in 0..=len {
                let mut b = vec![b'a'; len];
                if nl < len {
                    b[nl] = b'\n';
                }
                let want = b.iter().position(|&c| c == b'\n');
                assert_eq!(find_newline(&b), want, "len {len} nl {nl}");
            }
        }
        // Bytes near '\n' (0x0a) and high bytes must not be mistaken for it.
        let b = [0x0b, 0x09, 0x8a, 0xff, 0x00, 0x0b, 0x8a, 0x09, 0x0a];
        assert_eq!(find_newline(&b), Some(8));
    }

    #[test]
    fn push_u64_writes_decimal() {
        let mut v = Vec::new();
        push_u64(&mut v, 0);
        v.push(b' ');
        push_u64(&mut v, 1234567890123);
        assert_eq!(v, b"0 1234567890123");
    }
}
