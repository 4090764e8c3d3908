//! `openmax undo`: the project as it was before the latest session's last change (`--turn N`:
//! before its turn N), `--list`, `--gc`. A human's command: refused when started by an agent.
//! The session's next turn is told what the undo did (a note the session takes before its
//! next command, see [`crate::checkpoint::notes`]).
//!
//! Exit codes: 0 done (some paths may be kept, and are listed), 1 an error or a path that could
//! not be restored, 2 nothing to undo.

use std::io::Write;

use crate::checkpoint::report::report_text;
use crate::checkpoint::undo::{self, Pick, Report};
use crate::checkpoint::{gc, list, notes, Project};
use crate::config;
use crate::session::index::read_index;
use crate::session::{Home, ProjectState};

use super::cli::{Cli, UndoArgs};

/// Run `openmax undo …`; returns the exit code.
pub fn run(cli: &Cli, args: UndoArgs) -> i32 {
    match go(cli, args, &mut std::io::stdout().lock()) {
        Ok(code) => code,
        Err((code, msg)) => {
            eprintln!("openmax: {msg}");
            code
        }
    }
}

type Failed = (i32, String);

fn go(cli: &Cli, args: UndoArgs, out: &mut dyn Write) -> Result<i32, Failed> {
    let fail = |m: String| (1, m);
    if crate::start::agent_spawned() {
        return Err(fail(format!(
            "openmax undo is refused in a process started by an agent ({} is set): a human \
             runs it",
            crate::start::AGENT_ENV
        )));
    }
    let home = Home::from_env().map_err(fail)?;
    let root = crate::start::project_of(&cli.flags()).map_err(fail)?;
    let state = ProjectState::open(&home, &root);
    crate::session::perms::check(home.root(), Some(state.dir())).map_err(fail)?;
    let layers = config::load_layers(home.root(), &root).map_err(|e| fail(e.0))?;
    let caps = layers.merged.checkpoints.caps().map_err(|e| fail(e.0))?;
    if args.gc {
        let c = gc::collect(
            home.root(),
            caps.max_age_ms,
            crate::session::state::now_ms(),
        )
        .map_err(|e| fail(format!("the collection failed: {e}")))?;
        let _ = writeln!(
            out,
            "collected {} session log{}, {} checkpoint{}, {} object{} ({}); the store now holds {}",
            c.logs,
            plural(c.logs),
            c.checkpoints,
            plural(c.checkpoints),
            c.objects,
            plural(c.objects),
            crate::checkpoint::scan::human_bytes(c.bytes),
            crate::checkpoint::scan::human_bytes(c.size)
        );
        return Ok(0);
    }
    let p = Project::new(home.root(), &state, caps);
    let session = latest_session(&state).map_err(|m| (2, m))?;
    let entries = undo::entries(&p, &session).map_err(|e| (e.exit_code(), e.message().into()))?;
    if args.list {
        let _ = writeln!(
            out,
            "session {session} (the latest in {}):",
            state.project().display()
        );
        if entries.is_empty() {
            let _ = writeln!(out, "  no checkpoint: none of its turns wrote a file");
        }
        for e in &entries {
            let _ = writeln!(out, "  {}", list::line(&p, e));
        }
        return Ok(0);
    }
    if let Some(last) = entries.last() {
        if last.after.is_none() {
            if let Some(pid) = owner(&state, &session) {
                return Err(fail(format!(
                    "session {session} is running {} (openmax pid {pid}): wait for it to end, \
                     or cancel it, then undo",
                    undo::describe(last)
                )));
            }
        }
    }
    let pick = match args.turn {
        Some(n) => Pick::Turn(n),
        None => Pick::Last,
    };
    let report = undo::run(&p, &session, pick, args.force)
        .map_err(|e| (e.exit_code(), e.message().into()))?;
    print_report(out, &report);
    if let Err(e) = notes::add(&p.dir, &session, &undo::note(&report, "openmax undo")) {
        let _ = writeln!(
            out,
            "(the session's next turn will not be told of this undo: {e})"
        );
    }
    Ok(if report.failed.is_empty() { 0 } else { 1 })
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// The project's latest session (as `--continue` picks it).
fn latest_session(state: &ProjectState) -> Result<String, String> {
    let none = || {
        format!(
            "no session in {}: nothing to undo",
            state.project().display()
        )
    };
    let index = read_index(&state.sessions_dir()).map_err(|_| none())?;
    index.latest().map(|e| e.id.clone()).ok_or_else(none)
}

/// The pid of the live process owning `session`, if one does.
fn owner(state: &ProjectState, session: &str) -> Option<u32> {
    let path = state.sessions_dir().join(format!("{session}.lock"));
    let f = std::fs::File::open(&path).ok()?;
    match f.try_lock() {
        Ok(()) => {
            let _ = f.unlock();
            None
        }
        Err(_) => Some(
            std::fs::read_to_string(&path)
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(0),
        ),
    }
}

/// What an undo did, for a person.
pub fn print_report(out: &mut dyn Write, r: &Report) {
    let _ = write!(out, "{}", report_text(r));
}
