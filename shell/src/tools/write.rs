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
//! A file over [`MAX_FILE_BYTES`] is neither read nor replaced. The rename is the commit point
//! (see [`Stop`]): a call stopped (cancel, time limit) before it removes its temporary file and
//! the directories it created, so the project is as it was; the old file is read and the new
//! bytes are written in chunks, with the stop flag checked between them.

use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use openmax_core::tool::{FileDiff, ToolOutcome, ToolPlan};
use serde_json::Value;

use super::args::Args;
use super::client_files::ClientError;
use super::diff::unified;
use super::edit::{self, EditError};
use super::path::{io_reason, resolve, Resolved};
use super::stop::Stop;
use super::{fail, invalid_plan, ToolContext};

/// Largest file `write_file` replaces or `edit_file` edits (its text is held in memory and
/// diffed).
pub const MAX_FILE_BYTES: u64 = 64 << 20;
/// Bytes read or written between two checks of the stop flag.
const CHUNK: usize = 1 << 20;

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
    stop: &Stop,
) -> Result<Option<String>, String> {
    let rel = &target.rel;
    let size = match std::fs::metadata(&target.abs) {
        Ok(m) if m.is_dir() => return Err(format!("{tool}: {rel} is a directory")),
        Ok(m) if !m.is_file() => return Err(format!("{tool}: {rel} is not a regular file")),
        Ok(m) => m.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{tool}: cannot read {rel}: {}", io_reason(&e))),
    };
    let too_big = |size: u64| {
        format!(
            "{tool}: {rel} is {size} bytes, over the {} MiB this tool edits or replaces; use shell for it",
            MAX_FILE_BYTES >> 20
        )
    };
    if size > MAX_FILE_BYTES {
        return Err(too_big(size));
    }
    if let Some(text) = ctx.client_files.read(&target.abs, stop) {
        return text.map(Some).map_err(|e| match e {
            ClientError::Failed(e) => format!("{tool}: the client could not read {rel}: {e}"),
            ClientError::Unanswered => format!(
                "{tool}: stopped before the client answered the read of {rel}; nothing was written"
            ),
        });
    }
    let cannot = |e: std::io::Error| format!("{tool}: cannot read {rel}: {}", io_reason(&e));
    // Non-blocking, so a FIFO swapped in since the check above cannot hang the open.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&target.abs)
        .map_err(cannot)?;
    if !file.metadata().map_err(cannot)?.is_file() {
        return Err(format!("{tool}: {rel} is not a regular file"));
    }
    let mut bytes = Vec::with_capacity(size as usize);
    // One byte past the cap tells a file that grew since the check.
    let mut reader = file.take(MAX_FILE_BYTES + 1);
    let mut chunk = vec![0u8; CHUNK];
    loop {
        if stop.is_set() {
            return Err(format!("{tool}: cancelled; nothing was written"));
        }
        match reader.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => bytes.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(cannot(e)),
        }
    }
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(too_big(bytes.len() as u64));
    }
    match String::from_utf8(bytes) {
        Ok(s) => Ok(Some(s)),
        Err(e) if lossy => Ok(Some(String::from_utf8_lossy(e.as_bytes()).into_owned())),
        Err(_) => Err(format!(
            "{tool}: {rel} is not a UTF-8 text file; it cannot be edited (write_file can replace it)"
        )),
    }
}

/// Refuse a path the human's own tools run code from later (`[sandbox] protected`).
fn refuse_protected(ctx: &ToolContext, tool: &str, target: &Resolved) -> Result<(), String> {
    if ctx.sandbox.protects(&ctx.project, &target.abs) {
        return Err(format!(
            "{tool}: {} is protected: git runs what is there (configuration, hooks) at the \
             human's next git command, outside any sandbox, so the agent may not change it; \
             nothing was written (the list is [sandbox] protected in {})",
            target.resolved_rel,
            crate::session::shown("config.toml")
        ));
    }
    Ok(())
}

fn prepare_write(ctx: &ToolContext, args: &Value, stop: &Stop) -> Result<Change, String> {
    const NAME: &str = "write_file";
    let a = Args::new(NAME, args, &["path", "content"])?;
    let path = a.string("path")?;
    let content = a.string("content")?;
    let target = resolve(&ctx.project, path).map_err(|e| format!("{NAME}: {e}"))?;
    if target.rel == "." {
        return Err(format!("{NAME}: the project root is a directory"));
    }
    refuse_protected(ctx, NAME, &target)?;
    let old = current(ctx, NAME, &target, true, stop)?;
    let diff = unified(&target.rel, old.as_deref().unwrap_or(""), content);
    Ok(Change {
        created: old.is_none(),
        target,
        new: content.to_string(),
        diff,
        replaced: 0,
    })
}

fn prepare_edit(ctx: &ToolContext, args: &Value, stop: &Stop) -> Result<Change, String> {
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
    refuse_protected(ctx, NAME, &target)?;
    let rel = target.rel.clone();
    let Some(old) = current(ctx, NAME, &target, false, stop)? else {
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
            sandbox: Default::default(),
            confirm: None,
        },
        Err(e) => invalid_plan(true, e),
    }
}

/// Inspect a `write_file` call (computes the diff it would make).
pub fn plan_write(ctx: &ToolContext, args: &Value) -> ToolPlan {
    plan_of("write_file", prepare_write(ctx, args, &Stop::new()))
}

/// Inspect an `edit_file` call (computes the diff it would make, or why it cannot apply).
pub fn plan_edit(ctx: &ToolContext, args: &Value) -> ToolPlan {
    plan_of("edit_file", prepare_edit(ctx, args, &Stop::new()))
}

/// Run a `write_file` call.
pub fn run_write(ctx: &ToolContext, args: &Value, stop: &Stop) -> ToolOutcome {
    match prepare_write(ctx, args, stop) {
        Ok(c) => commit(ctx, "write_file", c, stop),
        Err(e) => fail(e),
    }
}

/// Run an `edit_file` call.
pub fn run_edit(ctx: &ToolContext, args: &Value, stop: &Stop) -> ToolOutcome {
    match prepare_edit(ctx, args, stop) {
        Ok(c) => commit(ctx, "edit_file", c, stop),
        Err(e) => fail(e),
    }
}

fn commit(ctx: &ToolContext, tool: &str, c: Change, stop: &Stop) -> ToolOutcome {
    let rel = &c.target.rel;
    let mut created = Vec::new();
    if let Some(parent) = c.target.abs.parent() {
        if let Err(e) = create_dirs(parent, &mut created) {
            remove_dirs(&created);
            return fail(format!(
                "{tool}: cannot create the directories for {rel}: {}",
                io_reason(&e)
            ));
        }
    }
    let written = if ctx.client_files.writes() {
        // Sending the write is the commit point: once it is out, the client may apply it.
        if !stop.commit() {
            remove_dirs(&created);
            return fail(format!("{tool}: cancelled; nothing was written"));
        }
        match ctx.client_files.write(&c.target.abs, &c.new, stop) {
            Ok(()) => Ok(()),
            Err(ClientError::Failed(e)) => {
                remove_dirs(&created);
                return fail(format!("{tool}: the client could not write {rel}: {e}"));
            }
            Err(ClientError::Unanswered) => {
                return fail(format!(
                    "{tool}: the call stopped (cancelled, or over the [limits] tool_timeout_s \
                     limit) before the client answered the write of {rel}; the client may \
                     still write it"
                ));
            }
        }
    } else {
        replace(&c.target.abs, c.new.as_bytes(), stop)
    };
    match written {
        Ok(()) => {}
        Err(Replace::Stopped) => {
            remove_dirs(&created);
            return fail(format!("{tool}: cancelled; nothing was written"));
        }
        Err(Replace::Io(e)) => {
            remove_dirs(&created);
            return fail(format!("{tool}: cannot write {rel}: {}", io_reason(&e)));
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
        images: Vec::new(),
    }
}

/// Create the missing directories of `dir`, outermost first, recording each one created.
fn create_dirs(dir: &Path, created: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut missing = Vec::new();
    let mut at = Some(dir);
    while let Some(d) = at {
        if d.exists() {
            break;
        }
        missing.push(d.to_path_buf());
        at = d.parent();
    }
    for d in missing.into_iter().rev() {
        match std::fs::create_dir(&d) {
            Ok(()) => created.push(d),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && d.is_dir() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Remove the directories [`create_dirs`] made, innermost first (only while still empty).
fn remove_dirs(created: &[PathBuf]) {
    for d in created.iter().rev() {
        let _ = std::fs::remove_dir(d);
    }
}

/// Why [`replace`] changed nothing.
enum Replace {
    /// The call was stopped before the commit point.
    Stopped,
    Io(std::io::Error),
}

impl From<std::io::Error> for Replace {
    fn from(e: std::io::Error) -> Self {
        Replace::Io(e)
    }
}

/// Replace the file at `path` with `bytes` by renaming a flushed temporary file over it (see
/// the module invariants). The temporary file is removed when anything fails.
fn replace(path: &Path, bytes: &[u8], stop: &Stop) -> Result<(), Replace> {
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
        for chunk in bytes.chunks(CHUNK) {
            if stop.is_set() {
                return Err(Replace::Stopped);
            }
            f.write_all(chunk)?;
        }
        if let Some(mode) = mode {
            f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        }
        f.sync_all()?;
        drop(f);
        if !stop.commit() {
            return Err(Replace::Stopped);
        }
        Ok(std::fs::rename(&tmp, path)?)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn project(tag: &str) -> (PathBuf, ToolContext) {
        let dir = crate::scratch::path(&format!("write-{tag}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir is writable");
        let ctx = ToolContext::new(&dir, "t").expect("exists");
        (ctx.project.clone(), ctx)
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .expect("readable")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_stopped_write_or_edit_changes_nothing_and_leaves_nothing_behind() {
        let (dir, ctx) = project("stopped");
        std::fs::write(dir.join("a.txt"), "old\n").expect("write");
        let stopped = Stop::new();
        assert!(stopped.stop());
        let out = run_write(
            &ctx,
            &json!({"path": "new/deep/b.txt", "content": "x\n"}),
            &stopped,
        );
        assert!(!out.ok);
        assert_eq!(out.output, "write_file: cancelled; nothing was written");
        let out = run_edit(
            &ctx,
            &json!({"path": "a.txt", "old_string": "old", "new_string": "new"}),
            &stopped,
        );
        assert_eq!(
            (out.ok, out.output.as_str()),
            (false, "edit_file: cancelled; nothing was written")
        );
        assert_eq!(std::fs::read_to_string(dir.join("a.txt")).unwrap(), "old\n");
        assert_eq!(names(&dir), ["a.txt"]);
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn a_stop_after_reading_undoes_the_temporary_file_and_the_new_directories() {
        let (dir, ctx) = project("undo");
        std::fs::create_dir(dir.join("keep")).expect("mkdir");
        let stop = Stop::new();
        let c = prepare_write(
            &ctx,
            &json!({"path": "keep/n1/n2/b.txt", "content": "x\n"}),
            &stop,
        )
        .expect("valid");
        // Stopped between preparing the change and committing it.
        assert!(stop.stop());
        let out = commit(&ctx, "write_file", c, &stop);
        assert_eq!(
            (out.ok, out.output.as_str()),
            (false, "write_file: cancelled; nothing was written")
        );
        assert_eq!(names(&dir), ["keep"]);
        assert!(names(&dir.join("keep")).is_empty());
        // Not stopped: the write commits, and a stop afterwards says so.
        let go = Stop::new();
        let out = run_write(
            &ctx,
            &json!({"path": "keep/n1/b.txt", "content": "x\n"}),
            &go,
        );
        assert!(out.ok, "{}", out.output);
        assert!(!go.stop(), "the write had committed");
        assert_eq!(names(&dir.join("keep/n1")), ["b.txt"]);
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn files_over_the_cap_are_neither_read_nor_replaced() {
        let (dir, ctx) = project("cap");
        let big = std::fs::File::create(dir.join("big.txt")).expect("create");
        big.set_len(MAX_FILE_BYTES + 1).expect("sparse");
        let want = format!(
            "is {} bytes, over the 64 MiB this tool edits or replaces; use shell for it",
            MAX_FILE_BYTES + 1
        );
        let out = run_write(
            &ctx,
            &json!({"path": "big.txt", "content": "x"}),
            &Stop::new(),
        );
        assert!(!out.ok && out.output.ends_with(&want), "{}", out.output);
        let out = run_edit(
            &ctx,
            &json!({"path": "big.txt", "old_string": "a", "new_string": "b"}),
            &Stop::new(),
        );
        assert!(
            !out.ok && out.output.starts_with("edit_file: big.txt is"),
            "{}",
            out.output
        );
        assert!(
            plan_write(&ctx, &json!({"path": "big.txt", "content": "x"}))
                .invalid
                .is_some_and(|e| e.ends_with(&want))
        );
        assert_eq!(
            std::fs::metadata(dir.join("big.txt")).unwrap().len(),
            MAX_FILE_BYTES + 1
        );
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
