//! `glob`: files matching a pattern under a directory, found by a parallel `ignore` walk.
//!
//! Invariants: results are project-relative file paths (never directories), sorted; at most
//! [`MAX_RESULTS`] paths and `output_cap_bytes` bytes, with a notice giving the total when cut.

use super::stop::Stop;
use std::path::Path;
use std::sync::Mutex;

use ignore::WalkState;
use openmax_core::tool::{ToolOutcome, ToolPlan};
use serde_json::Value;

use super::args::Args;
use super::cap::take_lines;
use super::path::{display_rel, resolve, Resolved};
use super::{fail, invalid_plan, ok, read_plan, ToolContext};
use crate::walk::{self, Batch, GlobFilter};

/// Most paths one call returns.
pub const MAX_RESULTS: usize = 1000;

const NAME: &str = "glob";

struct Call {
    pattern: String,
    filter: GlobFilter,
    base: Resolved,
}

fn parse(ctx: &ToolContext, args: &Value) -> Result<Call, String> {
    let a = Args::new(NAME, args, &["pattern", "path"])?;
    let pattern = a.string("pattern")?;
    let filter = GlobFilter::new(NAME, pattern)?;
    let base = resolve(&ctx.project, a.opt_string("path")?.unwrap_or("."))
        .map_err(|e| format!("{NAME}: {e}"))?;
    Ok(Call {
        pattern: pattern.to_string(),
        filter,
        base,
    })
}

/// Inspect a `glob` call.
pub fn plan(ctx: &ToolContext, args: &Value) -> ToolPlan {
    match parse(ctx, args) {
        Ok(c) => read_plan(
            c.base.targets(),
            format!("{NAME} {} in {}", c.pattern, c.base.rel),
            String::new(),
        ),
        Err(e) => invalid_plan(false, e),
    }
}

/// Run a `glob` call.
pub fn run(ctx: &ToolContext, args: &Value, stop: &Stop) -> ToolOutcome {
    let call = match parse(ctx, args) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    if !call.base.abs.is_dir() {
        return fail(format!(
            "{NAME}: directory not found: {} (`path` must be a directory)",
            call.base.rel
        ));
    }
    let found = Mutex::new(Vec::new());
    let base = call.base.abs.as_path();
    walk::builder(base, call.filter.wants_hidden)
        .build_parallel()
        .run(|| {
            let mut batch = Batch::new(&found);
            let filter = &call.filter;
            let project = ctx.project.as_path();
            Box::new(move |entry| {
                if stop.is_set() {
                    return WalkState::Quit;
                }
                let Ok(entry) = entry else {
                    return WalkState::Continue;
                };
                if entry.file_type().is_some_and(|t| t.is_dir()) {
                    return WalkState::Continue;
                }
                let rel = entry.path().strip_prefix(base).unwrap_or(Path::new(""));
                if filter.is_match(rel) {
                    batch.push(display_rel(project, entry.path()));
                }
                WalkState::Continue
            })
        });
    if stop.is_set() {
        return fail(format!("{NAME}: cancelled"));
    }
    let mut found = found.into_inner().unwrap_or_else(|p| p.into_inner());
    found.sort();
    if found.is_empty() {
        return ok(format!(
            "no files match {} in {}\n",
            call.pattern, call.base.rel
        ));
    }
    let capped = take_lines(&found, ctx.output_cap_bytes, MAX_RESULTS);
    let mut text = capped.text;
    if capped.cut {
        text.push_str(&format!(
            "[{} files match; showing the first {} (sorted); narrow the pattern or the path]\n",
            found.len(),
            capped.shown
        ));
    }
    ok(text)
}
