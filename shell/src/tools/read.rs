//! `read_file`: a text file with line numbers, a window of it, or a refusal for binary files.
//!
//! Invariants: lines are numbered from 1 (`offset` is 1-based); each shown line is
//! `{number:>6}\t{text}` with its line ending removed; a line over [`MAX_LINE_CHARS`] is cut
//! with a marker; the output holds at most `limit` (default [`DEFAULT_LIMIT`]) lines and at
//! most `output_cap_bytes` bytes, and when the file goes on past the window a final notice
//! names the `offset` to read on from. A NUL byte in the first 8 KiB or invalid UTF-8 in the
//! part read refuses the file. With client files, an existing file's text is the client's.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::sync::atomic::{AtomicBool, Ordering};

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
pub fn run(ctx: &ToolContext, args: &Value, stop: &AtomicBool) -> ToolOutcome {
    let call = match parse(ctx, args) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    match read(ctx, &call, stop) {
        Ok(text) => ok(text),
        Err(e) => fail(e),
    }
}

fn read(ctx: &ToolContext, call: &Call, stop: &AtomicBool) -> Result<String, String> {
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
    if let Some(text) = ctx.client_files.read(&call.target.abs) {
        let text = text.map_err(|e| format!("{NAME}: the client could not read {rel}: {e}"))?;
        return show(
            ctx,
            call,
            BufReader::new(std::io::Cursor::new(text.into_bytes())),
            stop,
        );
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
    stop: &AtomicBool,
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
    let mut line = Vec::new();
    let mut number = 0u64;
    let mut last_shown = 0u64;
    let mut cut_by_cap = false;
    loop {
        if stop.load(Ordering::Relaxed) {
            return Err(format!("{NAME}: cancelled"));
        }
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| format!("{NAME}: cannot read {rel}: {}", io_reason(&e)))?;
        if n == 0 {
            break;
        }
        number += 1;
        let text = std::str::from_utf8(&line).map_err(|_| {
            format!(
                "{NAME}: {rel} is not valid UTF-8 text (line {number}); it cannot be shown as text"
            )
        })?;
        if number < call.offset {
            continue;
        }
        let text = text.strip_suffix('\n').unwrap_or(text);
        let text = text.strip_suffix('\r').unwrap_or(text);
        let shown = cut_line(text);
        let entry = format!("{number:>6}\t{shown}\n");
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
    let rest = count_rest(&mut reader, !line.is_empty() && cut_by_cap);
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
fn count_rest<R: Read>(reader: &mut BufReader<R>, pending: bool) -> Option<(u64, bool)> {
    let mut count = u64::from(pending);
    let mut scanned = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    let mut last = b'\n';
    loop {
        if scanned >= COUNT_SCAN_BYTES {
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

fn cut_line(text: &str) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(MAX_LINE_CHARS) {
        None => text.into(),
        Some((at, _)) => {
            let more = text[at..].chars().count();
            format!("{}… [line cut: {more} more characters]", &text[..at]).into()
        }
    }
}
