//! `openmax sessions`: a project's sessions (or every project's), the one used last first, as
//! a table or as JSON: the id, when it started and was last used, its turns, its first prompt,
//! and whether it is live (owned by a running openmax, whose lock on it the list finds held).
//!
//! Invariants:
//! - Listing writes nothing: the index is read, never rebuilt (a missing or corrupt one is
//!   reported with the `openmax sessions repair` hint), and a session's lock is only probed
//!   (a shared lock tried and let go at once; the owner holds an exclusive one).
//! - A session in which no prompt was ever admitted is not listed.

use std::io::Write;
use std::path::Path;

use serde::Serialize;

use super::index::{read_index, IndexError};
use super::state::{Home, ProjectState};

/// One listed session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Row {
    pub id: String,
    /// The project, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// Unix milliseconds.
    pub started_ms: u64,
    /// Unix milliseconds of the last use (a turn's end, a resume, a compaction).
    pub last_used_ms: u64,
    /// Turns ended, when the index knows.
    pub turns: Option<u64>,
    /// The first prompt, one line.
    pub first_prompt: Option<String>,
    /// Owned by a running openmax now.
    pub live: bool,
}

/// The state of every project under `home` that has a sessions directory.
pub fn all_projects(home: &Home) -> Vec<ProjectState> {
    let Ok(rd) = std::fs::read_dir(home.root().join("projects")) else {
        return Vec::new();
    };
    let mut out: Vec<ProjectState> = rd
        .flatten()
        .filter(|e| e.path().join("sessions").is_dir())
        .map(|e| ProjectState::at(e.path()))
        .collect();
    out.sort_by(|a, b| a.dir().cmp(b.dir()));
    out
}

/// Whether a running process owns session `id` (its exclusive lock is held).
pub fn live(sessions_dir: &Path, id: &str) -> bool {
    let Ok(f) = std::fs::File::open(sessions_dir.join(format!("{id}.lock"))) else {
        return false;
    };
    match f.try_lock_shared() {
        Ok(()) => {
            let _ = f.unlock();
            false
        }
        Err(std::fs::TryLockError::WouldBlock) => true,
        Err(std::fs::TryLockError::Error(_)) => false,
    }
}

/// The listed sessions of one project, the one used last first; an unreadable index is the
/// message to print (with the repair hint).
pub fn rows(state: &ProjectState) -> Result<Vec<Row>, String> {
    let dir = state.sessions_dir();
    let index = match read_index(&dir) {
        Ok(i) => i,
        Err(IndexError::Missing) => {
            let records = std::fs::read_dir(&dir).is_ok_and(|rd| {
                rd.flatten()
                    .any(|e| e.file_name().to_string_lossy().ends_with(".jsonl"))
            });
            if !records {
                return Ok(Vec::new());
            }
            return Err(format!(
                "the session index of {} is missing; run `openmax sessions repair` in the \
                 project to rebuild it from the session records",
                project_name(state, None)
            ));
        }
        Err(IndexError::Corrupt(m)) => {
            return Err(format!(
                "{m}; run `openmax sessions repair` in the project to rebuild it from the \
                 session records"
            ))
        }
        Err(IndexError::Io(m)) => return Err(m),
    };
    let project = index.project.clone().or_else(|| {
        state
            .known_project()
            .map(|p| p.display().to_string())
            .or_else(|| {
                let first = index.sessions.first()?;
                super::rebuild::header_of(&dir.join(&first.record)).map(|(_, p)| p)
            })
    });
    Ok(index
        .newest_first()
        .into_iter()
        .map(|e| Row {
            id: e.id.clone(),
            project: project.clone(),
            started_ms: e.created_ms,
            last_used_ms: e.updated_ms,
            turns: e.turns,
            first_prompt: e.first_prompt.clone(),
            live: live(&dir, &e.id),
        })
        .collect())
}

fn project_name(state: &ProjectState, from_index: Option<&str>) -> String {
    from_index
        .map(str::to_string)
        .or_else(|| state.known_project().map(|p| p.display().to_string()))
        .unwrap_or_else(|| state.dir().display().to_string())
}

/// Print the sessions of `states` (the one used last first); the exit code.
pub fn print(
    states: &[ProjectState],
    json: bool,
    all: bool,
    out: &mut dyn Write,
) -> Result<i32, String> {
    let mut rows = Vec::new();
    let mut code = 0;
    for state in states {
        match self::rows(state) {
            Ok(r) => rows.extend(r),
            Err(e) if all => {
                eprintln!("openmax: {e}");
                code = 1;
            }
            Err(e) => return Err(e),
        }
    }
    rows.sort_by_key(|r| std::cmp::Reverse(r.last_used_ms));
    let w = |e: std::io::Error| format!("cannot write the list: {e}");
    if json {
        serde_json::to_writer_pretty(&mut *out, &rows).map_err(|e| e.to_string())?;
        writeln!(out).map_err(w)?;
        return Ok(code);
    }
    if rows.is_empty() {
        writeln!(
            out,
            "no sessions{} (a session appears here once a prompt was sent in it)",
            if all { "" } else { " in this project" }
        )
        .map_err(w)?;
        return Ok(code);
    }
    writeln!(
        out,
        "{:<16}  {:<16}  {:<16}  {:>5}  {:<4}  FIRST PROMPT",
        "ID", "STARTED (UTC)", "LAST USED (UTC)", "TURNS", "LIVE"
    )
    .map_err(w)?;
    for r in &rows {
        let prompt = r.first_prompt.as_deref().unwrap_or("");
        let prompt = if all {
            format!("{}  {prompt}", r.project.as_deref().unwrap_or("?"))
        } else {
            prompt.to_string()
        };
        writeln!(
            out,
            "{:<16}  {:<16}  {:<16}  {:>5}  {:<4}  {}",
            r.id,
            utc_minutes(r.started_ms),
            utc_minutes(r.last_used_ms),
            r.turns.map(|t| t.to_string()).unwrap_or_else(|| "?".into()),
            if r.live { "live" } else { "" },
            prompt
        )
        .map_err(w)?;
    }
    writeln!(
        out,
        "resume one with `openmax --resume <id>` (a unique start of the id is enough), copy one \
         with `openmax --fork <id>`"
    )
    .map_err(w)?;
    Ok(code)
}

/// `YYYY-MM-DD HH:MM` of Unix milliseconds, in UTC.
pub fn utc_minutes(ms: u64) -> String {
    crate::utc::minutes(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_live_while_its_lock_is_held() {
        let dir = crate::scratch::path("live");
        std::fs::create_dir_all(&dir).unwrap();
        assert!(!live(&dir, "s1"), "no lock file");
        let lock = std::fs::File::create(dir.join("s1.lock")).unwrap();
        assert!(!live(&dir, "s1"), "a lock file nobody holds");
        // Another open file description holds it, as a running openmax would.
        lock.lock().unwrap();
        assert!(live(&dir, "s1"));
        assert!(!live(&dir, "s2"), "another session");
        lock.unlock().unwrap();
        assert!(!live(&dir, "s1"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Records without an index are named by their project's path when the state was opened
    /// for it, and by the state's directory when it was not (every project listed).
    #[test]
    fn a_missing_index_is_reported_with_its_project() {
        let root = crate::scratch::path("noindex");
        let project = root.join("the-project");
        std::fs::create_dir_all(&project).unwrap();
        let home = crate::session::Home::new(root.join("home"));
        let state = ProjectState::open(&home, &project);
        std::fs::create_dir_all(state.sessions_dir()).unwrap();
        assert_eq!(rows(&state), Ok(Vec::new()), "no record, nothing to list");
        std::fs::write(state.sessions_dir().join("s1.jsonl"), "").unwrap();
        let project = std::fs::canonicalize(&project).unwrap();
        let e = rows(&state).unwrap_err();
        assert!(
            e.contains(&format!(
                "the session index of {} is missing",
                project.display()
            )),
            "{e}"
        );
        let e = rows(&ProjectState::at(state.dir().to_path_buf())).unwrap_err();
        assert!(
            e.contains(&format!(
                "the session index of {} is missing",
                state.dir().display()
            )),
            "{e}"
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// Listing every project goes on past one whose sessions cannot be listed (said on stderr,
    /// exit code 1); listing one project stops at it.
    #[test]
    fn every_project_is_listed_past_a_broken_one_and_one_project_stops_at_it() {
        let root = crate::scratch::path("list-all");
        let home = crate::session::Home::new(root.join("home"));
        let states: Vec<ProjectState> = ["fine", "broken"]
            .iter()
            .map(|p| {
                let project = root.join(p);
                std::fs::create_dir_all(&project).unwrap();
                let state = ProjectState::open(&home, &project);
                std::fs::create_dir_all(state.sessions_dir()).unwrap();
                state
            })
            .collect();
        std::fs::write(states[1].sessions_dir().join("s1.jsonl"), "").unwrap();
        let mut out = Vec::new();
        assert_eq!(print(&states, false, true, &mut out), Ok(1));
        assert!(
            String::from_utf8_lossy(&out).starts_with("no sessions ("),
            "{}",
            String::from_utf8_lossy(&out)
        );
        let e = print(&states, false, false, &mut Vec::new()).unwrap_err();
        assert!(e.contains("the session index of"), "{e}");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn utc_minutes_of_known_instants() {
        assert_eq!(utc_minutes(0), "1970-01-01 00:00");
        assert_eq!(utc_minutes(951_782_400_000), "2000-02-29 00:00");
        assert_eq!(utc_minutes(1_796_221_347_988), "2026-12-02 14:22");
    }
}
