//! Undo's decisions on a real directory: a human's change between two turns is kept, an
//! excluded file a turn created is removed and one it deleted is listed as lost, an excluded
//! file a file tool wrote comes back with its bytes, a moved `HEAD` is reported.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::log::{self, Line};
use super::undo::{self, Pick};
use super::{Caps, Project};
use crate::session::{Home, ProjectState};

struct T {
    base: PathBuf,
    p: Project,
}

impl Drop for T {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

fn setup(name: &str) -> T {
    let base = crate::scratch::path(&format!("undo-{name}"));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(base.join("project/.git")).unwrap();
    let root = std::fs::canonicalize(base.join("project")).unwrap();
    let home = Home::new(base.join("home"));
    let state = ProjectState::open(&home, &root);
    T {
        p: Project::new(home.root(), &state, Caps::default()),
        base,
    }
}

impl T {
    fn root(&self) -> &Path {
        &self.p.root
    }
    fn write(&self, rel: &str, text: &str) {
        let path = self.root().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    fn read(&self, rel: &str) -> Option<String> {
        std::fs::read_to_string(self.root().join(rel)).ok()
    }
    /// A turn: its `before` checkpoint, `change`, its `after` checkpoint, as the worker logs them.
    fn turn(&self, n: u64, captured: &[&str], change: impl FnOnce(&T)) {
        let none = BTreeSet::new();
        let b = self.p.take("s", n, "before", &none).unwrap();
        log::append(
            &self.p.dir,
            "s",
            Line::Before {
                turn: n,
                cp: b.id.clone(),
                prompt: format!("turn {n}"),
                at_ms: b.at_ms,
            },
        )
        .unwrap();
        for c in captured {
            assert!(self.p.capture(&b.id, c).unwrap(), "{c} captured");
        }
        change(self);
        let extra: BTreeSet<String> = captured.iter().map(|c| c.to_string()).collect();
        let a = self.p.take("s", n, "after", &extra).unwrap();
        log::append(
            &self.p.dir,
            "s",
            Line::After {
                turn: n,
                cp: a.id,
                at_ms: a.at_ms,
            },
        )
        .unwrap();
    }
}

#[test]
fn a_change_between_two_turns_is_kept_unless_forced() {
    let t = setup("between");
    t.write("a.txt", "a0\n");
    t.turn(1, &[], |t| t.write("a.txt", "a1\n"));
    t.write("a.txt", "human\n");
    t.turn(2, &[], |t| t.write("a.txt", "a2\n"));
    let plan = undo::plan(&t.p, "s", Pick::Turn(1), false).unwrap();
    assert!(plan.steps.is_empty(), "{:?}", plan.steps);
    assert_eq!(plan.kept.len(), 1);
    assert!(
        plan.kept[0].1.contains("between two turns"),
        "{:?}",
        plan.kept
    );
    assert_eq!(plan.what, "turns 1-2");
    // Undoing turn 2 alone goes back to the human's text.
    let r = undo::run(&t.p, "s", Pick::Last, false).unwrap();
    assert_eq!(r.plan.what, "turn 2");
    assert_eq!(t.read("a.txt").as_deref(), Some("human\n"));
    let r = undo::run(&t.p, "s", Pick::Turn(1), true).unwrap();
    assert!(r.failed.is_empty());
    assert_eq!(t.read("a.txt").as_deref(), Some("a0\n"));
}

#[test]
fn excluded_files_created_go_deleted_ones_are_lost_written_ones_come_back() {
    let t = setup("excluded");
    t.write(".gitignore", "build/\n*.log\n");
    t.write("build/old.o", "old object\n");
    t.write("app.log", "log before\n");
    t.turn(1, &["app.log"], |t| {
        std::fs::remove_file(t.root().join("build/old.o")).unwrap();
        t.write("build/new.o", "new object\n");
        t.write("app.log", "log written by a file tool\n");
    });
    let r = undo::run(&t.p, "s", Pick::Last, false).unwrap();
    assert_eq!(t.read("build/new.o"), None, "created by the turn: removed");
    assert_eq!(t.read("app.log").as_deref(), Some("log before\n"));
    assert_eq!(r.plan.lost.len(), 1, "{:?}", r.plan.lost);
    assert_eq!(r.plan.lost[0].0, "build/old.o");
    // And the undo of the undo puts the turn's excluded writes back.
    undo::run(&t.p, "s", Pick::Last, false).unwrap();
    assert_eq!(
        t.read("app.log").as_deref(),
        Some("log written by a file tool\n")
    );
    assert_eq!(t.read("build/new.o").as_deref(), Some("new object\n"));
}

#[test]
fn a_moved_head_is_reported_and_git_left_alone() {
    let t = setup("head");
    t.write(".git/HEAD", "ref: refs/heads/main\n");
    t.write(".git/refs/heads/main", "1111111111111111\n");
    t.write("a.txt", "a0\n");
    t.turn(1, &[], |t| {
        t.write("a.txt", "a1\n");
        t.write(".git/refs/heads/main", "2222222222222222\n");
    });
    let r = undo::run(&t.p, "s", Pick::Last, false).unwrap();
    let head = r.plan.head.clone().unwrap();
    assert!(
        head.contains("main at 111111111111 → main at 222222222222"),
        "{head}"
    );
    assert_eq!(
        t.read(".git/refs/heads/main").as_deref(),
        Some("2222222222222222\n")
    );
    assert_eq!(t.read("a.txt").as_deref(), Some("a0\n"));
}

#[test]
fn nothing_to_undo_is_said() {
    let t = setup("nothing");
    assert!(matches!(
        undo::run(&t.p, "s", Pick::Last, false),
        Err(undo::UndoError::Nothing(_))
    ));
    t.write("a.txt", "a0\n");
    t.turn(1, &[], |_| {});
    let e = undo::run(&t.p, "s", Pick::Last, false).unwrap_err();
    assert_eq!(e.exit_code(), 2, "{e:?}");
}

#[test]
fn same_treats_an_excluded_name_as_any_entry_of_its_kind() {
    use super::tree::Node;
    let file = Some(Node::File {
        hash: "a".repeat(64),
        size: 1,
        mode: 0o644,
    });
    assert!(undo::same(&Some(Node::Ignored { dir: false }), &file));
    assert!(!undo::same(&Some(Node::Ignored { dir: true }), &file));
    assert!(!undo::same(&None, &file));
    assert!(undo::same(&None, &None));
}
