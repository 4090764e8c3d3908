//! `list_dir`: the entries of one directory, sorted, directories marked with `/`.
//!
//! Invariants: hidden entries are shown (except `.git`), entries ignored by `.gitignore` and
//! friends are not (their count is reported); at most [`MAX_ENTRIES`] entries and
//! `output_cap_bytes` bytes, with a notice when cut.

use super::stop::Stop;

use openmax_core::tool::{ToolOutcome, ToolPlan};
use serde_json::Value;

use super::args::Args;
use super::cap::take_lines;
use super::path::{io_reason, resolve, Resolved};
use super::{fail, invalid_plan, ok, read_plan, ToolContext};
use crate::walk;

/// Most entries one call lists.
pub const MAX_ENTRIES: usize = 1000;

const NAME: &str = "list_dir";

fn parse(ctx: &ToolContext, args: &Value) -> Result<Resolved, String> {
    let a = Args::new(NAME, args, &["path"])?;
    let path = a.opt_string("path")?.unwrap_or(".");
    resolve(&ctx.project, path).map_err(|e| format!("{NAME}: {e}"))
}

/// Inspect a `list_dir` call.
pub fn plan(ctx: &ToolContext, args: &Value) -> ToolPlan {
    match parse(ctx, args) {
        Ok(t) => read_plan(t.targets(), format!("{NAME} {}", t.rel), String::new()),
        Err(e) => invalid_plan(false, e),
    }
}

/// Run a `list_dir` call.
pub fn run(ctx: &ToolContext, args: &Value, stop: &Stop) -> ToolOutcome {
    let target = match parse(ctx, args) {
        Ok(t) => t,
        Err(e) => return fail(e),
    };
    let rel = &target.rel;
    let meta = match std::fs::metadata(&target.abs) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return fail(format!("{NAME}: directory not found: {rel}"))
        }
        Err(e) => return fail(format!("{NAME}: cannot list {rel}: {}", io_reason(&e))),
    };
    if !meta.is_dir() {
        return fail(format!(
            "{NAME}: {rel} is a file, not a directory; use read_file to read it"
        ));
    }
    let mut all = 0usize;
    match std::fs::read_dir(&target.abs) {
        Ok(rd) => {
            for e in rd.filter_map(Result::ok) {
                if stop.is_set() {
                    return fail(format!("{NAME}: cancelled"));
                }
                all += usize::from(e.file_name() != ".git");
            }
        }
        Err(e) => return fail(format!("{NAME}: cannot list {rel}: {}", io_reason(&e))),
    }
    let mut entries = Vec::new();
    for entry in walk::builder(&target.abs, true).max_depth(Some(1)).build() {
        if stop.is_set() {
            return fail(format!("{NAME}: cancelled"));
        }
        let Ok(entry) = entry else { continue };
        if entry.depth() == 0 {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        // `metadata` follows a symlink, so a link to a directory is marked as one.
        let is_dir = std::fs::metadata(entry.path()).is_ok_and(|m| m.is_dir());
        entries.push(if is_dir { format!("{name}/") } else { name });
    }
    entries.sort();
    let ignored = all.saturating_sub(entries.len());
    let mut text = if entries.is_empty() {
        format!("[{rel} is empty]\n")
    } else {
        let capped = take_lines(&entries, ctx.output_cap_bytes, MAX_ENTRIES);
        let mut t = capped.text;
        if capped.cut {
            t.push_str(&format!(
                "[showing the first {} of {} entries; list a subdirectory or use glob to narrow]\n",
                capped.shown,
                entries.len()
            ));
        }
        t
    };
    if ignored > 0 {
        text.push_str(&format!(
            "[{ignored} more entries hidden by .gitignore/.ignore rules]\n"
        ));
    }
    ok(text)
}
