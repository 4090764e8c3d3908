//! What an undo changes, decided from a session's checkpoint log, and doing it.
//!
//! An undo goes back to the checkpoint taken before a turn (`openmax undo --turn N`), or before
//! the session's last change (`openmax undo`: its last turn or undo that changed a file), and
//! undoes every change the log records from there on. For each path a recorded change touched:
//!
//! - its target is the path as it was before the first recorded change to it in that range
//!   (so what a human changed between turns, and never a turn, stays);
//! - it is *kept* when its bytes, mode or link now differ from the state the last recorded
//!   change left, or a human changed it between two recorded changes, unless `force`;
//! - an excluded path known by name only cannot come back when it is gone (its bytes were not
//!   recorded); one that a turn created is removed.
//!
//! Everything happens under the project's lock: a checkpoint of the project now (`undo_before`,
//! which is what undoing this undo restores, so `openmax undo` twice redoes), the changes, a
//! checkpoint after (`undo_after`), and an `undo` line in the session's log. `.git` is never
//! touched: when `HEAD` moved in the range, the plan says so.

use std::collections::{BTreeMap, BTreeSet};
use std::io;

use super::apply::Step;
use super::log::{self, Entry, Kind};
use super::manifest::Manifest;
use super::tree::{Changes, Node, Reader};
use super::Project;

/// Which checkpoint an undo goes back to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    /// Before the session's last change (turn or undo) that changed a file.
    Last,
    /// Before the turn with this number.
    Turn(u64),
}

/// Why there is no undo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UndoError {
    /// Nothing to undo (exit 2).
    Nothing(String),
    /// Refused or failed (exit 1).
    Failed(String),
}

impl UndoError {
    pub fn exit_code(&self) -> i32 {
        match self {
            UndoError::Nothing(_) => 2,
            UndoError::Failed(_) => 1,
        }
    }
    pub fn message(&self) -> &str {
        match self {
            UndoError::Nothing(m) | UndoError::Failed(m) => m,
        }
    }
}

impl From<io::Error> for UndoError {
    fn from(e: io::Error) -> Self {
        UndoError::Failed(e.to_string())
    }
}

/// What an undo will do.
#[derive(Debug, Clone)]
pub struct Plan {
    pub session: String,
    /// What is undone, in words (`turn 3`, `turns 2-4`, `the undo of turn 3`).
    pub what: String,
    /// The turn whose checkpoint is restored.
    pub to_turn: u64,
    /// The paths that change.
    pub steps: Vec<Step>,
    /// Paths left as they are, with why (a human changed them; `--force` overrides).
    pub kept: Vec<(String, String)>,
    /// Paths that cannot come back, with why.
    pub lost: Vec<(String, String)>,
    /// Said when `HEAD` moved in the range (`.git` is left alone).
    pub head: Option<String>,
    /// Other things to know (a turn that never ended, a partial checkpoint).
    pub notes: Vec<String>,
    /// The checkpoint of the project as the plan saw it.
    pub now: Manifest,
    /// Excluded paths whose bytes some checkpoint of the range recorded.
    extra: BTreeSet<String>,
}

/// A done undo.
#[derive(Debug, Clone)]
pub struct Report {
    pub plan: Plan,
    /// Paths that could not be changed, with the error.
    pub failed: Vec<(String, String)>,
    /// The checkpoint after the undo.
    pub after: String,
}

/// Whether two nodes are the same as far as both are recorded: an excluded name matches any
/// entry of its kind (its bytes were not recorded).
pub fn same(a: &Option<Node>, b: &Option<Node>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(Node::Ignored { dir }), Some(n)) | (Some(n), Some(Node::Ignored { dir })) => {
            n.is_dir() == *dir
        }
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}

/// The entries of a session's log.
pub fn entries(p: &Project, session: &str) -> Result<Vec<Entry>, UndoError> {
    let lines = log::lines(&p.dir, session)
        .map_err(|e| UndoError::Failed(format!("cannot read the checkpoint log: {e}")))?;
    Ok(log::entries(&lines))
}

/// An entry in words.
pub fn describe(e: &Entry) -> String {
    match &e.kind {
        Kind::Turn { turn, .. } => format!("turn {turn}"),
        Kind::Undo { what, to_turn, .. } if what.is_empty() => {
            format!("the undo to turn {to_turn}")
        }
        Kind::Undo { what, .. } => format!("the undo of {what}"),
    }
}

/// Decide the undo (under the project's lock, which the caller holds).
pub fn plan_locked(p: &Project, session: &str, pick: Pick, force: bool) -> Result<Plan, UndoError> {
    let entries = entries(p, session)?;
    if entries.is_empty() {
        return Err(UndoError::Nothing(format!(
            "session {session} has no checkpoint: none of its turns wrote a file"
        )));
    }
    let mut befores: BTreeMap<String, Manifest> = BTreeMap::new();
    let mut extra = BTreeSet::new();
    for e in &entries {
        let m = p.manifest(&e.before)?;
        extra.extend(m.captured.iter().cloned());
        befores.insert(e.before.clone(), m);
    }
    let now = p.take_locked(session, 0, "undo_before", &extra)?;
    let mut reader = Reader::new(&p.store);
    // Each entry's changes, and the root it ended at.
    let mut ends: Vec<String> = Vec::new();
    let mut changes: Vec<Changes> = Vec::new();
    for e in &entries {
        let end = match &e.after {
            Some(a) => p.manifest(a)?.root,
            None => now.root.clone(),
        };
        let mut c = Changes::new();
        reader.diff(&befores[&e.before].root, &end, "", &mut c)?;
        ends.push(end);
        changes.push(c);
    }
    let start = match pick {
        Pick::Turn(n) => entries
            .iter()
            .position(|e| matches!(e.kind, Kind::Turn { turn, .. } if turn == n))
            .ok_or_else(|| {
                let turns: Vec<String> = entries
                    .iter()
                    .filter_map(|e| match e.kind {
                        Kind::Turn { turn, .. } => Some(turn.to_string()),
                        Kind::Undo { .. } => None,
                    })
                    .collect();
                UndoError::Failed(format!(
                    "turn {n} of session {session} has no checkpoint (the turns that wrote: \
                     {}); `openmax undo --list` shows them",
                    turns.join(", ")
                ))
            })?,
        Pick::Last => (0..entries.len())
            .rev()
            .find(|&i| !changes[i].is_empty())
            .ok_or_else(|| {
                UndoError::Nothing(format!(
                    "no turn of session {session} changed a file that is still as it left it"
                ))
            })?,
    };
    let range = start..entries.len();
    let what = what_of(&entries[start..]);
    let to_turn = entries[start].turn();
    let mut plan = Plan {
        session: session.to_string(),
        what,
        to_turn,
        steps: Vec::new(),
        kept: Vec::new(),
        lost: Vec::new(),
        head: None,
        notes: Vec::new(),
        now: now.clone(),
        extra,
    };
    for e in &entries[range.clone()] {
        if e.after.is_none() {
            plan.notes.push(format!(
                "{} did not end (openmax was stopped during it): its changes are what the \
                 project holds now, so a change of yours since cannot be told apart",
                describe(e)
            ));
        }
        if let Some(n) = befores[&e.before].partial_note() {
            plan.notes.push(n);
        }
    }
    // Per path: its target (before its first change in the range), the state the last change
    // left, and whether a human changed it between two changes.
    let mut paths: BTreeMap<String, (Option<Node>, Option<Node>, bool)> = BTreeMap::new();
    for i in range.clone() {
        for (path, (before, after)) in &changes[i] {
            match paths.get_mut(path) {
                None => {
                    paths.insert(path.clone(), (before.clone(), after.clone(), false));
                }
                Some((_, expected, between)) => {
                    if !same(expected, before) {
                        *between = true;
                    }
                    *expected = after.clone();
                }
            }
        }
    }
    for (path, (target, expected, between)) in paths {
        let current = reader.node_at(&now.root, &path)?;
        if same(&current, &target) {
            continue;
        }
        if !force && (between || !same(&current, &expected)) {
            let why = if between {
                "changed between two turns by someone else"
            } else {
                "changed since the turn by someone else"
            };
            plan.kept.push((path, why.to_string()));
            continue;
        }
        match &target {
            Some(Node::Ignored { .. }) => {
                if current.is_none() {
                    plan.lost.push((
                        path,
                        "excluded by the ignore rules: its contents were not recorded".into(),
                    ));
                }
            }
            _ => plan.steps.push(Step {
                path,
                now: current,
                to: target,
            }),
        }
    }
    let first = &befores[&entries[start].before];
    let last_git = match &entries[entries.len() - 1].after {
        Some(a) => p.manifest(a)?.git,
        None => now.git.clone(),
    };
    if first.git != last_git {
        let d = |h: &Option<super::git::Head>| {
            h.as_ref()
                .map(|h| h.describe())
                .unwrap_or_else(|| "no repository".into())
        };
        plan.head = Some(format!(
            "HEAD moved during {} ({} → {}); .git is left alone: undo restores the files only",
            plan.what,
            d(&first.git),
            d(&last_git)
        ));
    }
    Ok(plan)
}

/// `turn 3`, `turns 2-4 (and 1 undo)`, `the undo of turn 3`.
fn what_of(entries: &[Entry]) -> String {
    let turns: Vec<u64> = entries
        .iter()
        .filter_map(|e| match e.kind {
            Kind::Turn { turn, .. } => Some(turn),
            Kind::Undo { .. } => None,
        })
        .collect();
    let undos = entries.len() - turns.len();
    match (turns.as_slice(), undos) {
        ([], _) if entries.len() == 1 => describe(&entries[0]),
        ([], n) => format!("{n} undos"),
        ([t], 0) => format!("turn {t}"),
        ([a, .., b], 0) => format!("turns {a}-{b}"),
        ([t], n) => format!("turn {t} (and {n} undo{})", if n == 1 { "" } else { "s" }),
        ([a, .., b], n) => format!(
            "turns {a}-{b} (and {n} undo{})",
            if n == 1 { "" } else { "s" }
        ),
    }
}

/// Decide the undo without doing it (the terminal UI's card).
pub fn plan(p: &Project, session: &str, pick: Pick, force: bool) -> Result<Plan, UndoError> {
    let _lock = p.lock()?;
    plan_locked(p, session, pick, force)
}

/// Decide and do the undo: the changes, a checkpoint after them, and the `undo` line.
pub fn run(p: &Project, session: &str, pick: Pick, force: bool) -> Result<Report, UndoError> {
    let _lock = p.lock()?;
    let plan = plan_locked(p, session, pick, force)?;
    if plan.steps.is_empty() {
        let mut why = format!("nothing to change for {}", plan.what);
        if !plan.kept.is_empty() {
            why.push_str(&format!(
                ": {} path{} changed since by someone else (kept; --force restores them): {}",
                plan.kept.len(),
                if plan.kept.len() == 1 { "" } else { "s" },
                plan.kept
                    .iter()
                    .map(|(p, _)| p.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        return Err(UndoError::Nothing(why));
    }
    // What the undo removes or replaces of an excluded file is recorded with its bytes first,
    // so undoing this undo brings it back.
    for s in &plan.steps {
        if s.now == Some(Node::Ignored { dir: false }) {
            p.capture_locked(&plan.now.id, &s.path)?;
        }
    }
    let failed = super::apply::apply(&p.root, &p.store, &plan.steps);
    let after = p.take_locked(session, 0, "undo_after", &plan.extra)?;
    let failed_paths: BTreeSet<&String> = failed.iter().map(|(p, _)| p).collect();
    log::append(
        &p.dir,
        session,
        log::Line::Undo {
            to_turn: plan.to_turn,
            what: plan.what.clone(),
            before: plan.now.id.clone(),
            after: after.id.clone(),
            restored: plan
                .steps
                .iter()
                .filter(|s| !failed_paths.contains(&s.path))
                .map(|s| s.path.clone())
                .collect(),
            kept: plan.kept.iter().map(|(p, _)| p.clone()).collect(),
            at_ms: crate::session::state::now_ms(),
        },
    )?;
    Ok(Report {
        plan,
        failed,
        after: after.id,
    })
}

/// The note the model gets at its next turn: what the undo restored and kept.
pub fn note(r: &Report, by: &str) -> String {
    let list = |v: Vec<String>| {
        let n = v.len();
        let mut shown: Vec<String> = v.into_iter().take(20).collect();
        if n > 20 {
            shown.push(format!("and {} more", n - 20));
        }
        shown.join(", ")
    };
    let done: Vec<String> = r
        .plan
        .steps
        .iter()
        .filter(|s| !r.failed.iter().any(|(p, _)| p == &s.path))
        .map(|s| format!("{} ({})", s.path, s.verb()))
        .collect();
    let mut s = format!(
        "the human undid {} ({by}): the project's files are back as they were before it; {}",
        r.plan.what,
        if done.is_empty() {
            "nothing was changed".to_string()
        } else {
            format!("changed: {}", list(done))
        }
    );
    if !r.plan.kept.is_empty() {
        s.push_str(&format!(
            "; kept as the human left them: {}",
            list(r.plan.kept.iter().map(|(p, _)| p.clone()).collect())
        ));
    }
    if !r.failed.is_empty() {
        s.push_str(&format!(
            "; could not be restored: {}",
            list(r.failed.iter().map(|(p, e)| format!("{p} ({e})")).collect())
        ));
    }
    if let Some(h) = &r.plan.head {
        s.push_str(&format!("; {h}"));
    }
    s.push_str(". Read files again before relying on what you saw of them earlier.");
    s
}
