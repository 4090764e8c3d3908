//! `grep`: lines matching a regex in the project's files, as `path:line:text`.
//!
//! Invariants: files come from a parallel `ignore` walk (ripgrep's rules) or are the one file
//! named by `path`; a file with a NUL byte is binary and skipped; matching is per line (line
//! endings removed, `^`/`$` anchor at line bounds); results are sorted by path then line; a
//! shown line is cut at [`MAX_LINE_CHARS`]; the output holds at most `output_cap_bytes` bytes
//! with a notice giving the totals when cut. At most [`MAX_STORED_BYTES`] of matched text is
//! kept in memory (the counts stay exact beyond it); files over 8 MiB are read in line-aligned
//! chunks rather than whole.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use ignore::WalkState;
use openmax_core::tool::{ToolOutcome, ToolPlan};
use regex::bytes::{Regex, RegexBuilder};
use serde_json::Value;

use super::args::Args;
use super::cap::{cut_chars, take_lines};
use super::path::{display_rel, io_reason, resolve, Resolved};
use super::walk::{self, Batch, GlobFilter};
use super::{fail, invalid_plan, ok, read_plan, ToolContext};

/// Longest matched line shown in full.
pub const MAX_LINE_CHARS: usize = 500;
/// Matched text kept in memory across all files.
pub const MAX_STORED_BYTES: usize = 16 << 20;

const NAME: &str = "grep";

struct Call {
    pattern: String,
    regex: Regex,
    base: Resolved,
    filter: Option<GlobFilter>,
}

/// The matches of one file.
struct FileHits {
    path: String,
    /// `(line number, text)`, possibly fewer than `count` when memory ran short.
    lines: Vec<(u64, String)>,
    count: usize,
}

fn parse(ctx: &ToolContext, args: &Value) -> Result<Call, String> {
    let a = Args::new(NAME, args, &["pattern", "path", "glob", "case_insensitive"])?;
    let pattern = a.string("pattern")?;
    if pattern.is_empty() {
        return Err(format!("{NAME}: the pattern is empty"));
    }
    let regex = RegexBuilder::new(pattern)
        .case_insensitive(a.flag("case_insensitive")?)
        .multi_line(true)
        .size_limit(64 << 20)
        .build()
        .map_err(|e| format!("{NAME}: invalid regex {pattern:?}: {e}"))?;
    let filter = match a.opt_string("glob")? {
        Some(g) => Some(GlobFilter::new(NAME, g)?),
        None => None,
    };
    let base = resolve(&ctx.project, a.opt_string("path")?.unwrap_or("."))
        .map_err(|e| format!("{NAME}: {e}"))?;
    Ok(Call {
        pattern: pattern.to_string(),
        regex,
        base,
        filter,
    })
}

/// Inspect a `grep` call.
pub fn plan(ctx: &ToolContext, args: &Value) -> ToolPlan {
    match parse(ctx, args) {
        Ok(c) => read_plan(
            c.base.targets(),
            format!("{NAME} {:?} in {}", c.pattern, c.base.rel),
            String::new(),
        ),
        Err(e) => invalid_plan(false, e),
    }
}

/// Run a `grep` call.
pub fn run(ctx: &ToolContext, args: &Value, stop: &AtomicBool) -> ToolOutcome {
    let call = match parse(ctx, args) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let meta = match std::fs::metadata(&call.base.abs) {
        Ok(m) => m,
        Err(e) => {
            return fail(format!(
                "{NAME}: cannot search {}: {}",
                call.base.rel,
                io_reason(&e)
            ))
        }
    };
    let stored = AtomicUsize::new(0);
    let hits = Mutex::new(Vec::new());
    if meta.is_file() {
        if is_binary(&call.base.abs) {
            return ok(format!(
                "{} is a binary file (it contains NUL bytes); not searched\n",
                call.base.rel
            ));
        }
        let mut batch = Batch::new(&hits);
        search_file(ctx, &call, &call.base.abs, &stored, &mut batch);
    } else if meta.is_dir() {
        let base = call.base.abs.as_path();
        let hidden = call.filter.as_ref().is_some_and(|f| f.wants_hidden);
        walk::builder(base, hidden).build_parallel().run(|| {
            let mut batch = Batch::new(&hits);
            let call = &call;
            let stored = &stored;
            Box::new(move |entry| {
                if stop.load(Ordering::Relaxed) {
                    return WalkState::Quit;
                }
                let Ok(entry) = entry else {
                    return WalkState::Continue;
                };
                if !entry.file_type().is_some_and(|t| t.is_file()) {
                    return WalkState::Continue;
                }
                if let Some(f) = &call.filter {
                    let rel = entry.path().strip_prefix(base).unwrap_or(Path::new(""));
                    if !f.is_match(rel) {
                        return WalkState::Continue;
                    }
                }
                search_file(ctx, call, entry.path(), stored, &mut batch);
                WalkState::Continue
            })
        });
    } else {
        return fail(format!(
            "{NAME}: {} is not a regular file or directory",
            call.base.rel
        ));
    }
    if stop.load(Ordering::Relaxed) {
        return fail(format!("{NAME}: cancelled"));
    }
    let mut hits = hits.into_inner().unwrap_or_else(|p| p.into_inner());
    hits.sort_by(|a, b| a.path.cmp(&b.path));
    let total: usize = hits.iter().map(|h| h.count).sum();
    if total == 0 {
        return ok(format!(
            "no matches for {:?} in {}\n",
            call.pattern, call.base.rel
        ));
    }
    let kept: usize = hits.iter().map(|h| h.lines.len()).sum();
    let lines = hits.iter().flat_map(|h| {
        h.lines
            .iter()
            .map(move |(n, text)| format!("{}:{n}:{text}", h.path))
    });
    let capped = take_lines(lines, ctx.output_cap_bytes, usize::MAX);
    let mut text = capped.text;
    if capped.cut || kept < total {
        text.push_str(&format!(
            "[{total} matching lines in {} files; showing the first {}; narrow the pattern, path or glob]\n",
            hits.len(),
            capped.shown
        ));
    }
    ok(text)
}

fn is_binary(path: &Path) -> bool {
    std::fs::read(path).is_ok_and(|b| b.contains(&0))
}

fn search_file(
    ctx: &ToolContext,
    call: &Call,
    path: &Path,
    stored: &AtomicUsize,
    batch: &mut Batch<'_, FileHits>,
) {
    let mut scan = Scan {
        call,
        stored,
        lines: Vec::new(),
        count: 0,
        next_line: 1,
    };
    let small = std::fs::metadata(path).is_ok_and(|m| m.len() <= CHUNK_BYTES as u64);
    let complete = if small {
        match std::fs::read(path) {
            Ok(bytes) => scan.chunk(&bytes, true),
            Err(_) => false,
        }
    } else {
        scan_large(path, &mut scan)
    };
    if complete && scan.count > 0 {
        batch.push(FileHits {
            path: display_rel(&ctx.project, &PathBuf::from(path)),
            lines: scan.lines,
            count: scan.count,
        });
    }
}

/// Files over this size are read in chunks of about this size (cut at line ends).
const CHUNK_BYTES: usize = 8 << 20;

/// Read a large file chunk by chunk; false when it is binary or unreadable.
fn scan_large(path: &Path, scan: &mut Scan<'_>) -> bool {
    use std::io::Read;
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    let mut file = std::io::BufReader::new(file);
    let mut buf: Vec<u8> = Vec::with_capacity(CHUNK_BYTES + 4096);
    loop {
        let have = buf.len();
        let Ok(n) = (&mut file)
            .take((CHUNK_BYTES.saturating_sub(have)).max(4096) as u64)
            .read_to_end(&mut buf)
        else {
            return false;
        };
        let eof = n == 0;
        if eof {
            return scan.chunk(&buf, true);
        }
        // Scan up to the last complete line; carry the rest.
        let Some(cut) = buf.iter().rposition(|&b| b == b'\n') else {
            continue;
        };
        if !scan.chunk(&buf[..=cut], false) {
            return false;
        }
        buf.drain(..=cut);
    }
}

/// Matching state of one file.
struct Scan<'a> {
    call: &'a Call,
    stored: &'a AtomicUsize,
    lines: Vec<(u64, String)>,
    count: usize,
    /// Number of the first line of the next chunk.
    next_line: u64,
}

impl Scan<'_> {
    /// Scan whole lines (`last`: the file's final chunk); false when the chunk is binary.
    fn chunk(&mut self, bytes: &[u8], last: bool) -> bool {
        if bytes.contains(&0) {
            return false;
        }
        // A final line ending does not start another (empty) line.
        let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
        let first = self.next_line;
        if !last || !body.is_empty() {
            self.next_line += body.iter().filter(|&&b| b == b'\n').count() as u64 + 1;
        }
        if bytes.is_empty() || !self.call.regex.is_match(bytes) {
            return true;
        }
        for (i, line) in body.split(|&b| b == b'\n').enumerate() {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if !self.call.regex.is_match(line) {
                continue;
            }
            self.count += 1;
            let text = cut_chars(&String::from_utf8_lossy(line), MAX_LINE_CHARS);
            if self.stored.fetch_add(text.len(), Ordering::Relaxed) < MAX_STORED_BYTES {
                self.lines.push((first + i as u64, text));
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    #[test]
    fn large_files_are_scanned_in_chunks_with_right_line_numbers() {
        let dir = std::env::temp_dir().join(format!("openmax-grep-large-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir is writable");
        let dir = dir.canonicalize().expect("just created");
        // ~20 MiB: three chunks; a match on the first and the last line and across a cut.
        let mut text = String::from("HIT first\n");
        let filler = "x".repeat(99) + "\n";
        let n = 200_000;
        for _ in 0..n {
            text.push_str(&filler);
        }
        text.push_str("HIT last");
        std::fs::write(dir.join("big.txt"), &text).expect("write");
        let ctx = ToolContext::new(&dir, "t").expect("exists");
        let out = run(
            &ctx,
            &serde_json::json!({"pattern": "^HIT"}),
            &AtomicBool::new(false),
        );
        assert_eq!(
            out.output,
            format!("big.txt:1:HIT first\nbig.txt:{}:HIT last\n", n + 2)
        );
        let mut bin = text.into_bytes();
        bin.push(0);
        std::fs::write(dir.join("big.txt"), &bin).expect("write");
        let out = run(
            &ctx,
            &serde_json::json!({"pattern": "^HIT"}),
            &AtomicBool::new(false),
        );
        assert_eq!(out.output, "no matches for \"^HIT\" in .\n");
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
