//! `write_file` and `edit_file`: the mutating file tools, each planned with the diff it would
//! make and run with the same computation on the file as it is then.
//!
//! Invariants: the diff in the plan is computed from the file at plan time, the diff in the
//! outcome from the file at run time (they differ only when the file changed in between);
//! nothing is written when validation fails; `write_file` creates missing parent directories;
//! a file that is not UTF-8 is never edited (but may be overwritten by `write_file`).
//! A write never goes through the existing file: the new bytes go to a temporary file in the
//! same directory (flushed to disk, with the old file's permission bits), which is then renamed
//! over the path. A hard link to a file outside the project is therefore replaced, never
//! written through, and a crash mid-write leaves the old file whole. With client files, the
//! current text is the client's and the new text goes to the client (which writes it).

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use openmax_core::tool::{FileDiff, ToolOutcome, ToolPlan};
use serde_json::Value;

use super::args::Args;
use super::diff::unified;
use super::edit::{self, EditError};
use super::path::{io_reason, resolve, Resolved};
use super::{fail, invalid_plan, ToolContext};

/// A mutation ready to be written.
struct Change {
    target: Resolved,
    new: String,
    diff: FileDiff,
    created: bool,
    /// Places replaced (edit_file).
    replaced: usize,
}

/// Read the current text of a file (the client's, with client files): `None` when it does
/// not exist.
fn current(
    ctx: &ToolContext,
    tool: &str,
    target: &Resolved,
    lossy: bool,
) -> Result<Option<String>, String> {
    let rel = &target.rel;
    match std::fs::metadata(&target.abs) {
        Ok(m) if m.is_dir() => return Err(format!("{tool}: {rel} is a directory")),
        Ok(m) if !m.is_file() => return Err(format!("{tool}: {rel} is not a regular file")),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{tool}: cannot read {rel}: {}", io_reason(&e))),
    }
    if let Some(text) = ctx.client_files.read(&target.abs) {
        return text
            .map(Some)
            .map_err(|e| format!("{tool}: the client could not read {rel}: {e}"));
    }
    let bytes = std::fs::read(&target.abs)
        .map_err(|e| format!("{tool}: cannot read {rel}: {}", io_reason(&e)))?;
    match String::from_utf8(bytes) {
        Ok(s) => Ok(Some(s)),
        Err(e) if lossy => Ok(Some(String::from_utf8_lossy(e.as_bytes()).into_owned())),
        Err(_) => Err(format!(
            "{tool}: {rel} is not a UTF-8 text file; it cannot be edited (write_file can replace it)"
        )),
    }
}

fn prepare_write(ctx: &ToolContext, args: &Value) -> Result<Change, String> {
    const NAME: &str = "write_file";
    let a = Args::new(NAME, args, &["path", "content"])?;
    let path = a.string("path")?;
    let content = a.string("content")?;
    let target = resolve(&ctx.project, path).map_err(|e| format!("{NAME}: {e}"))?;
    if target.rel == "." {
        return Err(format!("{NAME}: the project root is a directory"));
    }
    let old = current(ctx, NAME, &target, true)?;
    let diff = unified(&target.rel, old.as_deref().unwrap_or(""), content);
    Ok(Change {
        created: old.is_none(),
        target,
        new: content.to_string(),
        diff,
        replaced: 0,
    })
}

fn prepare_edit(ctx: &ToolContext, args: &Value) -> Result<Change, String> {
    const NAME: &str = "edit_file";
    let a = Args::new(
        NAME,
        args,
        &["path", "old_string", "new_string", "replace_all"],
    )?;
    let path = a.string("path")?;
    let old_string = a.string("old_string")?;
    let new_string = a.string("new_string")?;
    let replace_all = a.flag("replace_all")?;
    if old_string.is_empty() {
        return Err(format!(
            "{NAME}: old_string is empty; give the exact text to replace (use write_file to create or overwrite a whole file)"
        ));
    }
    if old_string == new_string {
        return Err(format!(
            "{NAME}: old_string and new_string are identical; there is nothing to change"
        ));
    }
    let target = resolve(&ctx.project, path).map_err(|e| format!("{NAME}: {e}"))?;
    let rel = target.rel.clone();
    let Some(old) = current(ctx, NAME, &target, false)? else {
        return Err(format!(
            "{NAME}: file not found: {rel} (use write_file to create a file)"
        ));
    };
    let (new, replaced) =
        edit::apply(&old, old_string, new_string, replace_all).map_err(|e| match e {
            EditError::NotFound => format!(
                "{NAME}: old_string was not found in {rel}; it must match the file's current text exactly, \
                 including whitespace and indentation (read the file again and copy the lines without their line-number prefix)"
            ),
            EditError::Ambiguous(n) => format!(
                "{NAME}: old_string matches {n} places in {rel}; add surrounding lines to make it unique, \
                 or set replace_all to true to replace every occurrence"
            ),
        })?;
    let diff = unified(&rel, &old, &new);
    Ok(Change {
        target,
        new,
        diff,
        created: false,
        replaced,
    })
}

fn plan_of(tool: &str, prepared: Result<Change, String>) -> ToolPlan {
    match prepared {
        Ok(c) => ToolPlan {
            mutating: true,
            targets: c.target.targets(),
            summary: format!(
                "{tool} {}{} (+{} -{})",
                c.target.rel,
                if c.created { " (new file)" } else { "" },
                c.diff.added,
                c.diff.removed
            ),
            detail: if c.diff.diff.is_empty() {
                format!("{} is unchanged", c.target.rel)
            } else {
                c.diff.diff
            },
            source: None,
            invalid: None,
        },
        Err(e) => invalid_plan(true, e),
    }
}

/// Inspect a `write_file` call (computes the diff it would make).
pub fn plan_write(ctx: &ToolContext, args: &Value) -> ToolPlan {
    plan_of("write_file", prepare_write(ctx, args))
}

/// Inspect an `edit_file` call (computes the diff it would make, or why it cannot apply).
pub fn plan_edit(ctx: &ToolContext, args: &Value) -> ToolPlan {
    plan_of("edit_file", prepare_edit(ctx, args))
}

/// Run a `write_file` call.
pub fn run_write(ctx: &ToolContext, args: &Value) -> ToolOutcome {
    match prepare_write(ctx, args) {
        Ok(c) => commit(ctx, "write_file", c),
        Err(e) => fail(e),
    }
}

/// Run an `edit_file` call.
pub fn run_edit(ctx: &ToolContext, args: &Value) -> ToolOutcome {
    match prepare_edit(ctx, args) {
        Ok(c) => commit(ctx, "edit_file", c),
        Err(e) => fail(e),
    }
}

fn commit(ctx: &ToolContext, tool: &str, c: Change) -> ToolOutcome {
    let rel = &c.target.rel;
    if let Some(parent) = c.target.abs.parent() {
        if let Err(e) = std::fs::create_dir_all(parent) {
            return fail(format!(
                "{tool}: cannot create the directories for {rel}: {}",
                io_reason(&e)
            ));
        }
    }
    match ctx.client_files.write(&c.target.abs, &c.new) {
        Some(Err(e)) => return fail(format!("{tool}: the client could not write {rel}: {e}")),
        Some(Ok(())) => {}
        None => {
            if let Err(e) = replace(&c.target.abs, c.new.as_bytes()) {
                return fail(format!("{tool}: cannot write {rel}: {}", io_reason(&e)));
            }
        }
    }
    let counts = format!("+{} -{}", c.diff.added, c.diff.removed);
    let output = if tool == "edit_file" {
        let places = if c.replaced == 1 {
            "1 place".to_string()
        } else {
            format!("{} places", c.replaced)
        };
        format!("edited {rel}: replaced {places} ({counts})")
    } else {
        let lines = c.new.lines().count();
        let verb = if c.created { "created" } else { "wrote" };
        format!(
            "{verb} {rel}: {lines} lines, {} bytes ({counts})",
            c.new.len()
        )
    };
    let diffs = if c.diff.diff.is_empty() {
        Vec::new()
    } else {
        vec![c.diff]
    };
    ToolOutcome {
        ok: true,
        output,
        diffs,
    }
}

/// Replace the file at `path` with `bytes` by renaming a flushed temporary file over it (see
/// the module invariants). The temporary file is removed when anything fails.
fn replace(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let tmp = dir.join(format!(
        ".{name}.openmax-tmp.{}.{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    // Permission bits of the file replaced (setuid and setgid are not carried over).
    let mode = std::fs::metadata(path)
        .ok()
        .filter(|m| m.is_file())
        .map(|m| m.permissions().mode() & 0o1777);
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            // A new file gets what `umask` leaves of 0o666, as with a plain create.
            .mode(if mode.is_some() { 0o600 } else { 0o666 })
            .open(&tmp)?;
        f.write_all(bytes)?;
        if let Some(mode) = mode {
            f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        }
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
