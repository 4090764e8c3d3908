//! `read_file`: a text file with line numbers, a window of it, or a refusal for binary files.
//!
//! Invariants: lines are numbered from 1 (`offset` is 1-based); each shown line is
//! `{number:>6}\t{text}` with its line ending removed; a line over [`MAX_LINE_CHARS`] is cut
//! with a marker; the output holds at most `limit` (default [`DEFAULT_LIMIT`]) lines and at
//! most `output_cap_bytes` bytes, and when the file goes on past the window a final notice
//! names the `offset` to read on from. A NUL byte in the first 8 KiB or invalid UTF-8 in the
//! part read refuses the file. With client files, an existing file's text is the client's.
//! Memory and time stay bounded by the window, not the file: of a line at most
//! [`KEEP_LINE_BYTES`] are held (the rest is validated and counted as it streams past), and the
//! stop flag (cancel, time limit) is checked before every read of at most 64 KiB.

use super::client_files::ClientError;
use super::stop::Stop;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};

use openmax_core::tool::{ToolOutcome, ToolPlan};
use serde_json::Value;

use super::args::Args;
use super::path::{io_reason, resolve, Resolved};
use super::{fail, ok, read_plan, ToolContext};

/// Lines shown when no `limit` is given.
pub const DEFAULT_LIMIT: u64 = 2000;
/// Longest line shown in full; longer lines are cut with a marker.
pub const MAX_LINE_CHARS: usize = 2000;
/// Bytes inspected for a NUL byte to call a file binary.
pub const BINARY_SNIFF_BYTES: usize = 8192;
/// Past the window, at most this many more bytes are scanned to count the file's lines.
const COUNT_SCAN_BYTES: u64 = 32 << 20;
/// Bytes of one line held in memory: enough for [`MAX_LINE_CHARS`] characters of any width.
pub const KEEP_LINE_BYTES: usize = MAX_LINE_CHARS * 4;

const NAME: &str = "read_file";

struct Call {
    target: Resolved,
    offset: u64,
    limit: u64,
}

fn parse(ctx: &ToolContext, args: &Value) -> Result<Call, String> {
    let a = Args::new(NAME, args, &["path", "offset", "limit"])?;
    let path = a.string("path")?;
    let offset = a.opt_positive("offset")?.unwrap_or(1);
    let limit = a.opt_positive("limit")?.unwrap_or(DEFAULT_LIMIT);
    let target = resolve(&ctx.project, path).map_err(|e| format!("{NAME}: {e}"))?;
    Ok(Call {
        target,
        offset,
        limit,
    })
}

/// Inspect a `read_file` call.
pub fn plan(ctx: &ToolContext, args: &Value) -> ToolPlan {
    match parse(ctx, args) {
        Ok(c) => read_plan(
            c.target.targets(),
            format!("{NAME} {}", c.target.rel),
            String::new(),
        ),
        Err(e) => super::invalid_plan(false, e),
    }
}

/// Run a `read_file` call.
pub fn run(ctx: &ToolContext, args: &Value, stop: &Stop) -> ToolOutcome {
    let call = match parse(ctx, args) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    // An image is read from the disk even where the client serves text files.
    if crate::images::is_image_file(&call.target.abs) {
        return image(&call);
    }
    match read(ctx, &call, stop) {
        Ok(text) => ok(text),
        Err(e) => fail(e),
    }
}

/// A PNG, JPEG, GIF or WebP file: the image itself for the model, after its result.
fn image(call: &Call) -> ToolOutcome {
    match crate::images::from_file(&call.target.rel, &call.target.abs) {
        Ok(img) => ToolOutcome {
            ok: true,
            output: format!("[{} follows]", img.describe()),
            diffs: Vec::new(),
            images: vec![img],
        },
        Err(e) => fail(format!("{NAME}: {e}")),
    }
}

fn read(ctx: &ToolContext, call: &Call, stop: &Stop) -> Result<String, String> {
    let rel = &call.target.rel;
    let meta = std::fs::metadata(&call.target.abs).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!("{NAME}: file not found: {rel}"),
        _ => format!("{NAME}: cannot read {rel}: {}", io_reason(&e)),
    })?;
    if meta.is_dir() {
        return Err(format!(
            "{NAME}: {rel} is a directory; use list_dir to see its entries"
        ));
    }
    if !meta.is_file() {
        // A FIFO or device would block or never end.
        return Err(format!("{NAME}: {rel} is not a regular file"));
    }
    if let Some(text) = ctx.client_files.read(&call.target.abs, stop) {
        let text = text.map_err(|e| match e {
            ClientError::Failed(e) => format!("{NAME}: the client could not read {rel}: {e}"),
            ClientError::Unanswered => {
                format!("{NAME}: stopped before the client answered the read of {rel}")
            }
        })?;
        let reader = BufReader::new(std::io::Cursor::new(text.into_bytes()));
        return show(ctx, call, reader, stop);
    }
    let file = File::open(&call.target.abs)
        .map_err(|e| format!("{NAME}: cannot read {rel}: {}", io_reason(&e)))?;
    show(ctx, call, BufReader::with_capacity(64 * 1024, file), stop)
}

/// The window of the text `reader` gives, numbered, with the notices.
fn show<R: Read>(
    ctx: &ToolContext,
    call: &Call,
    mut reader: BufReader<R>,
    stop: &Stop,
) -> Result<String, String> {
    let rel = &call.target.rel;
    let head = reader
        .fill_buf()
        .map_err(|e| format!("{NAME}: cannot read {rel}: {}", io_reason(&e)))?;
    let sniff = &head[..head.len().min(BINARY_SNIFF_BYTES)];
    if sniff.contains(&0) {
        return Err(format!(
            "{NAME}: {rel} is a binary file (it contains NUL bytes); it cannot be shown as text"
        ));
    }
    if head.is_empty() {
        return Ok(format!("[{rel} is empty]"));
    }

    let cap = ctx.output_cap_bytes.max(1);
    let mut out = String::new();
    let mut line = Line::default();
    let mut number = 0u64;
    let mut last_shown = 0u64;
    let mut cut_by_cap = false;
    loop {
        let more = line.read(&mut reader, stop).map_err(|e| match e {
            LineError::Stopped => format!("{NAME}: cancelled"),
            LineError::Io(e) => format!("{NAME}: cannot read {rel}: {}", io_reason(&e)),
            LineError::NotUtf8 => format!(
                "{NAME}: {rel} is not valid UTF-8 text (line {}); it cannot be shown as text",
                number + 1
            ),
        })?;
        if !more {
            break;
        }
        number += 1;
        if number < call.offset {
            continue;
        }
        let entry = format!("{number:>6}\t{}\n", line.shown());
        if !out.is_empty() && out.len() + entry.len() > cap {
            cut_by_cap = true;
            number -= 1;
            break;
        }
        out.push_str(&entry);
        last_shown = number;
        if last_shown - call.offset + 1 >= call.limit {
            break;
        }
    }
    if last_shown == 0 {
        return Err(format!(
            "{NAME}: offset {} is past the end of {rel} ({number} lines)",
            call.offset
        ));
    }
    // Anything left? (`number` is the last line consumed; a cap cut leaves one pending.)
    let rest = count_rest(&mut reader, cut_by_cap, stop);
    if let Some((more, exact)) = rest.filter(|(more, _)| *more > 0) {
        let total = if exact {
            format!("of {}", last_shown + more)
        } else {
            format!("of more than {}", last_shown + more)
        };
        let why = if cut_by_cap {
            format!(" (output cut at {cap} bytes)")
        } else {
            String::new()
        };
        out.push_str(&format!(
            "[showing lines {}-{last_shown} {total}{why}; the file continues: call read_file with offset={} to read on]\n",
            call.offset,
            last_shown + 1
        ));
    }
    Ok(out)
}

/// Count the lines after the window: `(count, exact)`. `pending` is a consumed line that was
/// not shown.
fn count_rest<R: Read>(
    reader: &mut BufReader<R>,
    pending: bool,
    stop: &Stop,
) -> Option<(u64, bool)> {
    let mut count = u64::from(pending);
    let mut scanned = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    let mut last = b'\n';
    loop {
        if scanned >= COUNT_SCAN_BYTES || stop.is_set() {
            return Some((count.max(1), false));
        }
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(_) => return Some((count.max(1), false)),
        };
        scanned += n as u64;
        count += buf[..n].iter().filter(|&&b| b == b'\n').count() as u64;
        last = buf[n - 1];
    }
    if last != b'\n' {
        count += 1;
    }
    Some((count, true))
}

/// Why [`Line::read`] gave no line.
enum LineError {
    Stopped,
    Io(std::io::Error),
    NotUtf8,
}

/// One line as read: its first [`KEEP_LINE_BYTES`] bytes and its length in characters, both
/// without the line ending.
#[derive(Default)]
struct Line {
    kept: Vec<u8>,
    chars: u64,
    /// Bytes of a character split across two reads, not yet validated.
    carry: Vec<u8>,
    /// The line's last byte so far was `\r` (dropped if the line ends in `\r\n`).
    cr: bool,
}

impl Line {
    /// Read the next line; false at the end of the file.
    fn read(&mut self, reader: &mut impl BufRead, stop: &Stop) -> Result<bool, LineError> {
        self.kept.clear();
        self.chars = 0;
        self.carry.clear();
        self.cr = false;
        let mut any = false;
        loop {
            if stop.is_set() {
                return Err(LineError::Stopped);
            }
            let buf = match reader.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(LineError::Io(e)),
            };
            if buf.is_empty() {
                break;
            }
            any = true;
            let (part, ends) = match buf.iter().position(|&b| b == b'\n') {
                Some(i) => (&buf[..i], true),
                None => (buf, false),
            };
            let used = part.len() + usize::from(ends);
            self.take(part)?;
            reader.consume(used);
            if ends {
                break;
            }
        }
        if !self.carry.is_empty() {
            return Err(LineError::NotUtf8);
        }
        if self.cr {
            self.chars -= 1;
            if self.kept.last() == Some(&b'\r') {
                self.kept.pop();
            }
        }
        Ok(any)
    }

    /// Validate and count `part`, keeping what fits.
    fn take(&mut self, part: &[u8]) -> Result<(), LineError> {
        if part.is_empty() {
            return Ok(());
        }
        let room = KEEP_LINE_BYTES.saturating_sub(self.kept.len());
        self.kept.extend_from_slice(&part[..part.len().min(room)]);
        self.cr = part.last() == Some(&b'\r');
        let mut data = std::mem::take(&mut self.carry);
        data.extend_from_slice(part);
        let valid = match std::str::from_utf8(&data) {
            Ok(t) => t,
            Err(e) if e.error_len().is_none() => {
                self.carry = data[e.valid_up_to()..].to_vec();
                std::str::from_utf8(&data[..e.valid_up_to()]).map_err(|_| LineError::NotUtf8)?
            }
            Err(_) => return Err(LineError::NotUtf8),
        };
        self.chars += valid.chars().count() as u64;
        Ok(())
    }

    /// The line as shown: cut after [`MAX_LINE_CHARS`] characters with a marker.
    fn shown(&self) -> String {
        // `kept` may end inside a character; the valid prefix holds every shown character.
        let text = match std::str::from_utf8(&self.kept) {
            Ok(t) => t,
            Err(e) => std::str::from_utf8(&self.kept[..e.valid_up_to()]).unwrap_or(""),
        };
        match text.char_indices().nth(MAX_LINE_CHARS) {
            None => text.to_string(),
            Some((at, _)) => {
                let more = self.chars - MAX_LINE_CHARS as u64;
                format!("{}… [line cut: {more} more characters]", &text[..at])
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(bytes: &[u8], chunk: usize) -> Vec<Result<(String, u64), &'static str>> {
        let mut reader = BufReader::with_capacity(chunk, bytes);
        let mut line = Line::default();
        let mut out = Vec::new();
        loop {
            match line.read(&mut reader, &Stop::new()) {
                Ok(true) => out.push(Ok((line.shown(), line.chars))),
                Ok(false) => return out,
                Err(LineError::NotUtf8) => {
                    out.push(Err("not utf-8"));
                    return out;
                }
                Err(_) => unreachable!("no I/O errors or stops here"),
            }
        }
    }

    #[test]
    fn a_line_streams_past_in_bounded_memory_whatever_the_chunking() {
        let long = "é".repeat(MAX_LINE_CHARS + 700);
        let text = format!("ab\r\n{long}\r\nlast\r");
        for chunk in [1, 3, 7, 64 * 1024] {
            let got = lines(text.as_bytes(), chunk);
            assert_eq!(got.len(), 3, "chunk {chunk}");
            assert_eq!(got[0], Ok(("ab".to_string(), 2)));
            let (shown, chars) = got[1].clone().unwrap();
            assert_eq!(chars, (MAX_LINE_CHARS + 700) as u64);
            assert_eq!(
                shown,
                format!(
                    "{}… [line cut: 700 more characters]",
                    "é".repeat(MAX_LINE_CHARS)
                )
            );
            assert_eq!(got[2], Ok(("last".to_string(), 4)));
        }
        let bad = [b'a', b'\n', 0xc3, b'\n'];
        assert_eq!(lines(&bad, 1), vec![Ok(("a".into(), 1)), Err("not utf-8")]);
        let cut = [b'a', 0xc3];
        assert_eq!(lines(&cut, 64), vec![Err("not utf-8")]);
    }

    #[test]
    fn a_stopped_read_reads_no_further() {
        let stop = Stop::new();
        assert!(stop.stop());
        let mut reader = BufReader::new(&b"a\nb\n"[..]);
        let r = Line::default().read(&mut reader, &stop);
        assert!(matches!(r, Err(LineError::Stopped)));
        assert_eq!(reader.fill_buf().unwrap(), b"a\nb\n");
    }
}
