//! `grep`: lines matching a regex in the project's files, as `path:line:text`, searched with
//! ripgrep's own libraries (`grep-regex`, `grep-searcher`) over an `ignore` walk.
//!
//! Invariants:
//! - Files come from a parallel `ignore` walk (ripgrep's rules) or are the one file named by
//!   `path`. Matching is per line (`^`/`$` anchor at line bounds, a `\r` before `\n` is not part
//!   of the line); the search time does not depend on line length.
//! - A file with a NUL byte is binary: the search of it stops there and it reports nothing.
//! - Caps, each reported in a notice at the end of the output: a file over [`MAX_FILE_BYTES`]
//!   is not searched; a line over [`MAX_LINE_BYTES`] stops the search of its file (the file
//!   reports nothing); the search stops at [`MAX_MATCHES`] matching lines. At most
//!   [`MAX_STORED_BYTES`] of matched text is kept in memory (the counts stay exact beyond it).
//! - Results are sorted by path then line; a shown line is cut at [`MAX_LINE_CHARS`]; the
//!   output holds at most `output_cap_bytes` bytes with a notice giving the totals when cut.
//! - The stop flag (cancel, timeout) is checked before each file and before every read of a
//!   file (at most 64 KiB apart), so a stopped search frees its threads promptly.

use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use grep_matcher::LineTerminator;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkMatch};
use ignore::WalkState;
use openmax_core::tool::{ToolOutcome, ToolPlan};
use serde_json::Value;

use super::args::Args;
use super::cap::{cut_chars, take_lines};
use super::path::{display_rel, io_reason, resolve, Resolved};
use super::stop::Stop;
use super::{fail, invalid_plan, ok, read_plan, ToolContext};
use crate::walk::{self, Batch, GlobFilter};

/// Longest matched line shown in full.
pub const MAX_LINE_CHARS: usize = 500;
/// Matched text kept in memory across all files.
pub const MAX_STORED_BYTES: usize = 16 << 20;
/// Files larger than this are not searched (named in a notice).
pub const MAX_FILE_BYTES: u64 = 1 << 30;
/// A line longer than this stops the search of its file (named in a notice).
pub const MAX_LINE_BYTES: usize = 128 << 20;
/// The search stops after this many matching lines.
pub const MAX_MATCHES: usize = 10_000;

const NAME: &str = "grep";
/// Files named in one notice.
const NAMED_IN_NOTICE: usize = 5;

struct Call {
    pattern: String,
    matcher: RegexMatcher,
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
    let matcher = RegexMatcherBuilder::new()
        .case_insensitive(a.flag("case_insensitive")?)
        .multi_line(true)
        .line_terminator(Some(b'\n'))
        .crlf(true)
        .size_limit(64 << 20)
        .dfa_size_limit(64 << 20)
        .build(pattern)
        .map_err(|e| format!("{NAME}: invalid regex {pattern:?}: {e}"))?;
    let filter = match a.opt_string("glob")? {
        Some(g) => Some(GlobFilter::new(NAME, g)?),
        None => None,
    };
    let base = resolve(&ctx.project, a.opt_string("path")?.unwrap_or("."))
        .map_err(|e| format!("{NAME}: {e}"))?;
    Ok(Call {
        pattern: pattern.to_string(),
        matcher,
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

/// What the searching threads share.
struct Shared<'a> {
    ctx: &'a ToolContext,
    call: &'a Call,
    stop: &'a Stop,
    /// Matched text kept so far.
    stored: AtomicUsize,
    /// Matching lines found so far (all files).
    matches: AtomicUsize,
    /// The match cap was reached.
    capped: AtomicBool,
    /// Files not searched for their size.
    too_big: Mutex<Vec<String>>,
    /// Files whose search stopped at an over-long line.
    long_line: Mutex<Vec<String>>,
}

impl Shared<'_> {
    fn halted(&self) -> bool {
        self.stop.is_set() || self.capped.load(Ordering::Relaxed)
    }

    fn note(&self, list: &Mutex<Vec<String>>, path: &Path) {
        let rel = display_rel(&self.ctx.project, &PathBuf::from(path));
        list.lock().unwrap_or_else(|p| p.into_inner()).push(rel);
    }
}

fn searcher() -> Searcher {
    SearcherBuilder::new()
        .line_terminator(LineTerminator::crlf())
        .binary_detection(BinaryDetection::quit(0))
        .line_number(true)
        .heap_limit(Some(MAX_LINE_BYTES))
        .build()
}

/// Run a `grep` call.
pub fn run(ctx: &ToolContext, args: &Value, stop: &Stop) -> ToolOutcome {
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
    let shared = Shared {
        ctx,
        call: &call,
        stop,
        stored: AtomicUsize::new(0),
        matches: AtomicUsize::new(0),
        capped: AtomicBool::new(false),
        too_big: Mutex::new(Vec::new()),
        long_line: Mutex::new(Vec::new()),
    };
    let hits = Mutex::new(Vec::new());
    if meta.is_file() {
        let mut batch = Batch::new(&hits);
        let found = search_file(&shared, &mut searcher(), &call.base.abs, &mut batch);
        if found == Found::Binary {
            return ok(format!(
                "{} is a binary file (it contains NUL bytes); not searched\n",
                call.base.rel
            ));
        }
    } else if meta.is_dir() {
        let base = call.base.abs.as_path();
        let hidden = call.filter.as_ref().is_some_and(|f| f.wants_hidden);
        walk::builder(base, hidden).build_parallel().run(|| {
            let mut batch = Batch::new(&hits);
            let mut searcher = searcher();
            let shared = &shared;
            Box::new(move |entry| {
                if shared.halted() {
                    return WalkState::Quit;
                }
                let Ok(entry) = entry else {
                    return WalkState::Continue;
                };
                if !entry.file_type().is_some_and(|t| t.is_file()) {
                    return WalkState::Continue;
                }
                if let Some(f) = &shared.call.filter {
                    let rel = entry.path().strip_prefix(base).unwrap_or(Path::new(""));
                    if !f.is_match(rel) {
                        return WalkState::Continue;
                    }
                }
                search_file(shared, &mut searcher, entry.path(), &mut batch);
                WalkState::Continue
            })
        });
    } else {
        return fail(format!(
            "{NAME}: {} is not a regular file or directory",
            call.base.rel
        ));
    }
    if stop.is_set() {
        return fail(format!("{NAME}: cancelled"));
    }
    let hits = hits.into_inner().unwrap_or_else(|p| p.into_inner());
    ok(render(&shared, hits))
}

/// The output: the matching lines under the cap, then the notices.
fn render(shared: &Shared<'_>, mut hits: Vec<FileHits>) -> String {
    let call = shared.call;
    hits.sort_by(|a, b| a.path.cmp(&b.path));
    let total: usize = hits.iter().map(|h| h.count).sum();
    let mut text = String::new();
    if total == 0 {
        text.push_str(&format!(
            "no matches for {:?} in {}\n",
            call.pattern, call.base.rel
        ));
    } else {
        let kept: usize = hits.iter().map(|h| h.lines.len()).sum();
        let lines = hits.iter().flat_map(|h| {
            h.lines
                .iter()
                .map(move |(n, text)| format!("{}:{n}:{text}", h.path))
        });
        let capped = take_lines(lines, shared.ctx.output_cap_bytes, usize::MAX);
        text = capped.text;
        if capped.cut || kept < total {
            text.push_str(&format!(
                "[{total} matching lines in {} files; showing the first {}; narrow the pattern, path or glob]\n",
                hits.len(),
                capped.shown
            ));
        }
    }
    if shared.capped.load(Ordering::Relaxed) {
        text.push_str(&format!(
            "[the search stopped at {MAX_MATCHES} matching lines (the match cap); narrow the pattern, path or glob]\n"
        ));
    }
    let lists = [
        (
            &shared.too_big,
            format!("larger than the {} MiB file cap", MAX_FILE_BYTES >> 20),
        ),
        (
            &shared.long_line,
            format!(
                "a line longer than the {} MiB line cap",
                MAX_LINE_BYTES >> 20
            ),
        ),
    ];
    for (list, why) in lists {
        let mut names = list.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if names.is_empty() {
            continue;
        }
        names.sort();
        let more = names.len().saturating_sub(NAMED_IN_NOTICE);
        names.truncate(NAMED_IN_NOTICE);
        let more = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        text.push_str(&format!(
            "[not searched ({why}): {}{more}]\n",
            names.join(", ")
        ));
    }
    text
}

/// How the search of one file ended.
#[derive(Debug, PartialEq, Eq)]
enum Found {
    /// Searched to the end (or to the match cap); its hits are in the batch.
    Searched,
    Binary,
    /// Too big, an over-long line, unreadable, or stopped: it reports nothing.
    Nothing,
}

fn search_file(
    shared: &Shared<'_>,
    searcher: &mut Searcher,
    path: &Path,
    batch: &mut Batch<'_, FileHits>,
) -> Found {
    // Open, then size the open file: one path lookup per file, as rg does. O_NONBLOCK so that a
    // file swapped for a FIFO after the walk cannot hold the search (no effect on regular files).
    let Ok(file) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
    else {
        return Found::Nothing;
    };
    match file.metadata() {
        Ok(m) if m.len() > MAX_FILE_BYTES => {
            shared.note(&shared.too_big, path);
            return Found::Nothing;
        }
        Ok(_) => {}
        Err(_) => return Found::Nothing,
    }
    let reader = Stoppable {
        inner: file,
        stop: shared.stop,
    };
    let mut sink = Collect {
        shared,
        lines: Vec::new(),
        count: 0,
        binary: false,
    };
    let result = searcher.search_reader(&shared.call.matcher, reader, &mut sink);
    let found = match result {
        _ if shared.stop.is_set() => Found::Nothing,
        Err(e) if e.to_string().contains("allocation limit") => {
            shared.note(&shared.long_line, path);
            Found::Nothing
        }
        Err(_) => Found::Nothing,
        Ok(()) if sink.binary => Found::Binary,
        Ok(()) => Found::Searched,
    };
    if found != Found::Searched {
        shared.matches.fetch_sub(sink.count, Ordering::Relaxed);
    } else if sink.count > 0 {
        batch.push(FileHits {
            path: display_rel(&shared.ctx.project, &PathBuf::from(path)),
            lines: sink.lines,
            count: sink.count,
        });
    }
    found
}

/// A file reader that fails once the stop flag is set, so a search in a long file (or a long
/// line) ends within one read.
struct Stoppable<'a> {
    inner: std::fs::File,
    stop: &'a Stop,
}

impl Read for Stoppable<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.stop.is_set() {
            return Err(io::Error::other("grep stopped"));
        }
        self.inner.read(buf)
    }
}

/// Collects one file's matching lines.
struct Collect<'a, 'b> {
    shared: &'a Shared<'b>,
    lines: Vec<(u64, String)>,
    count: usize,
    binary: bool,
}

impl Sink for Collect<'_, '_> {
    type Error = io::Error;

    fn matched(&mut self, _: &Searcher, m: &SinkMatch<'_>) -> Result<bool, io::Error> {
        if self.shared.halted() {
            return Ok(false);
        }
        if self.shared.matches.fetch_add(1, Ordering::Relaxed) >= MAX_MATCHES {
            self.shared.matches.fetch_sub(1, Ordering::Relaxed);
            self.shared.capped.store(true, Ordering::Relaxed);
            return Ok(false);
        }
        self.count += 1;
        let line = m.bytes();
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        // Only the shown head is decoded (a line can be many megabytes).
        let head = &line[..line.len().min(MAX_LINE_CHARS * 4 + 4)];
        let text = cut_chars(&String::from_utf8_lossy(head), MAX_LINE_CHARS);
        if self.shared.stored.fetch_add(text.len(), Ordering::Relaxed) < MAX_STORED_BYTES {
            self.lines.push((m.line_number().unwrap_or(0), text));
        }
        Ok(true)
    }

    fn binary_data(&mut self, _: &Searcher, _offset: u64) -> Result<bool, io::Error> {
        self.binary = true;
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_files_are_scanned_in_chunks_with_right_line_numbers() {
        let dir = crate::scratch::path("grep-large");
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
        let out = run(&ctx, &serde_json::json!({"pattern": "^HIT"}), &Stop::new());
        assert_eq!(
            out.output,
            format!("big.txt:1:HIT first\nbig.txt:{}:HIT last\n", n + 2)
        );
        let mut bin = text.into_bytes();
        bin.push(0);
        std::fs::write(dir.join("big.txt"), &bin).expect("write");
        let out = run(&ctx, &serde_json::json!({"pattern": "^HIT"}), &Stop::new());
        assert_eq!(out.output, "no matches for \"^HIT\" in .\n");
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
