//! stdin framing in bytes: lines up to [`MAX_LINE_BYTES`] become [`Input::Line`]; a longer line
//! becomes [`FramingFault::TooLong`] and one that is not UTF-8 [`FramingFault::NotUtf8`]; blank
//! lines are skipped, a trailing `\r` is stripped, and EOF is [`Input::EndOfInput`].
//!
//! Invariants:
//! - Memory is bounded: the framer never holds more than `MAX_LINE_BYTES` of a line. Once a line
//!   passes the cap its bytes are only counted until the next newline (a 1 GiB line costs no
//!   more than an 8 MiB one), and the buffer is shrunk back afterwards.
//! - Output does not depend on how the input is chunked: any split of the same bytes gives the
//!   same inputs.
//! - A final line without a newline is still a line (EOF terminates it).

use std::io::Read;

use openmax_core::machine::{FramingFault, Input};
use openmax_core::wire::MAX_LINE_BYTES;

/// Incremental line framer. Feed chunks with [`Framer::push`], then [`Framer::finish`] at EOF.
#[derive(Debug)]
pub struct Framer {
    cap: usize,
    buf: Vec<u8>,
    /// `Some(n)`: the current line passed the cap; `n` bytes of it so far.
    skipping: Option<u64>,
}

impl Default for Framer {
    fn default() -> Self {
        Framer::new()
    }
}

/// Capacity kept after a long line, so one huge line does not pin 8 MiB for the session.
const KEEP_CAPACITY: usize = 64 * 1024;

impl Framer {
    /// A framer with the contract's 8 MiB cap.
    pub fn new() -> Framer {
        Framer::with_cap(MAX_LINE_BYTES)
    }

    /// A framer with another cap (tests).
    pub fn with_cap(cap: usize) -> Framer {
        Framer {
            cap,
            buf: Vec::new(),
            skipping: None,
        }
    }

    /// Frame the bytes of `chunk`, appending complete lines' inputs to `out`.
    pub fn push(&mut self, mut chunk: &[u8], out: &mut Vec<Input>) {
        while !chunk.is_empty() {
            // `contains` on bytes is core's memchr (optimized even in debug builds): the cheap
            // test that lets a long line's chunks be counted without a byte-by-byte scan.
            let newline = if chunk.contains(&b'\n') {
                chunk.iter().position(|&b| b == b'\n')
            } else {
                None
            };
            match newline {
                Some(i) => {
                    self.take(&chunk[..i]);
                    self.end_line(out);
                    chunk = &chunk[i + 1..];
                }
                None => {
                    self.take(chunk);
                    chunk = &[];
                }
            }
        }
    }

    /// EOF: frame a final unterminated line, then [`Input::EndOfInput`].
    pub fn finish(&mut self, out: &mut Vec<Input>) {
        if !self.buf.is_empty() || self.skipping.is_some() {
            self.end_line(out);
        }
        out.push(Input::EndOfInput);
    }

    /// Bytes currently held (for the memory-bound test).
    pub fn held_capacity(&self) -> usize {
        self.buf.capacity()
    }

    fn take(&mut self, piece: &[u8]) {
        if let Some(n) = &mut self.skipping {
            *n += piece.len() as u64;
            return;
        }
        let needed = self.buf.len() + piece.len();
        if needed > self.cap {
            self.skipping = Some(needed as u64);
            self.buf = Vec::with_capacity(KEEP_CAPACITY.min(self.cap));
            return;
        }
        if self.buf.capacity() < needed {
            // Grow geometrically but never past the cap.
            let target = needed.max(self.buf.capacity() * 2).min(self.cap);
            self.buf.reserve_exact(target - self.buf.len());
        }
        self.buf.extend_from_slice(piece);
    }

    fn end_line(&mut self, out: &mut Vec<Input>) {
        if let Some(len) = self.skipping.take() {
            out.push(Input::Framing(FramingFault::TooLong { len }));
            return;
        }
        let mut line = std::mem::take(&mut self.buf);
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        if line.capacity() > KEEP_CAPACITY {
            self.buf = Vec::with_capacity(KEEP_CAPACITY.min(self.cap));
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            if line.capacity() <= KEEP_CAPACITY {
                line.clear();
                self.buf = line;
            }
            return;
        }
        match String::from_utf8(line) {
            Ok(s) => out.push(Input::Line(s)),
            Err(_) => out.push(Input::Framing(FramingFault::NotUtf8)),
        }
    }
}

/// Read `reader` to EOF (or a read error, treated as EOF), calling `send` with each input.
/// Stops early when `send` returns false (the receiver is gone).
pub fn pump<R: Read>(mut reader: R, mut send: impl FnMut(Input) -> bool) {
    let mut framer = Framer::new();
    let mut chunk = vec![0u8; 64 * 1024];
    let mut out = Vec::new();
    loop {
        let n = match reader.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        framer.push(&chunk[..n], &mut out);
        for input in out.drain(..) {
            if !send(input) {
                return;
            }
        }
    }
    framer.finish(&mut out);
    for input in out.drain(..) {
        if !send(input) {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame_chunks(cap: usize, data: &[u8], sizes: &[usize]) -> Vec<Input> {
        let mut f = Framer::with_cap(cap);
        let mut out = Vec::new();
        let mut rest = data;
        let mut i = 0;
        while !rest.is_empty() {
            let n = sizes[i % sizes.len()].max(1).min(rest.len());
            f.push(&rest[..n], &mut out);
            assert!(f.held_capacity() <= cap.max(KEEP_CAPACITY.min(cap)));
            rest = &rest[n..];
            i += 1;
        }
        f.finish(&mut out);
        out
    }

    fn line(s: &str) -> Input {
        Input::Line(s.to_string())
    }

    #[test]
    fn lines_blank_cr_and_eof() {
        let data = b"{\"cmd\":\"user\"}\r\n\n  \r\nsecond\nlast";
        let want = vec![
            line("{\"cmd\":\"user\"}"),
            line("second"),
            line("last"),
            Input::EndOfInput,
        ];
        for sizes in [&[1usize][..], &[2], &[3, 7], &[1000]] {
            assert_eq!(frame_chunks(100, data, sizes), want, "{sizes:?}");
        }
    }

    #[test]
    fn too_long_and_not_utf8_resync_at_any_boundary() {
        let mut data = Vec::new();
        data.extend_from_slice(b"ok1\n");
        data.extend(std::iter::repeat_n(b'x', 25));
        data.extend_from_slice(b"\n\xff\xfe\nexact-16-bytes!!\nok2\n");
        let want = vec![
            line("ok1"),
            Input::Framing(FramingFault::TooLong { len: 25 }),
            Input::Framing(FramingFault::NotUtf8),
            line("exact-16-bytes!!"),
            line("ok2"),
            Input::EndOfInput,
        ];
        for a in 1..12 {
            for b in 1..5 {
                assert_eq!(frame_chunks(16, &data, &[a, b]), want, "{a} {b}");
            }
        }
    }

    #[test]
    fn long_line_at_eof_and_memory_bound() {
        let mut f = Framer::with_cap(1024);
        let mut out = Vec::new();
        let block = vec![b'y'; 4096];
        for _ in 0..1000 {
            f.push(&block, &mut out);
            assert!(f.held_capacity() <= 1024);
        }
        assert!(out.is_empty());
        f.finish(&mut out);
        assert_eq!(
            out,
            vec![
                Input::Framing(FramingFault::TooLong { len: 4_096_000 }),
                Input::EndOfInput
            ]
        );
    }

    #[test]
    fn pump_reads_to_eof() {
        let mut got = Vec::new();
        pump(&b"a\nb"[..], |i| {
            got.push(i);
            true
        });
        assert_eq!(got, vec![line("a"), line("b"), Input::EndOfInput]);
    }
}
