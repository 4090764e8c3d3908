//! Checkpoints of a 10,000-file project: the time of a checkpoint when nothing changed (the
//! stat cache answers every file) and when 100 files changed, what the store grows by over 50
//! turns that each change one file, and the time of an undo of 100 files. Prints figures; no
//! timing is asserted.
//!
//! The project: 100 directories of 100 files of 1 to 3 KiB (text), a `.gitignore` excluding
//! `target/`, and 1,000 files under `target/` (listed by name only). Everything lives under
//! `$BENCH_DIR` (default: the system temp directory); the store and the project are on the same
//! file system, as `$OPENMAX_HOME` and a project usually are.
//!
//! Run: `bench/checkpoint.sh [ROUNDS]`. Figures in docs/benchmarks.md.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use openmax_shell::checkpoint::undo::{self, Pick};
use openmax_shell::checkpoint::{log, Caps, Project};
use openmax_shell::session::{Home, ProjectState};

const DIRS: usize = 100;
const FILES: usize = 100;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

fn summary(name: &str, mut v: Vec<Duration>) {
    v.sort();
    println!(
        "| {name} | {} | {} | {} | {} | {} |",
        v.len(),
        ms(v[0]),
        ms(percentile(&v, 0.5)),
        ms(percentile(&v, 0.9)),
        ms(*v.last().unwrap())
    );
}

fn content(d: usize, f: usize, round: usize) -> String {
    let line = format!("fn item_{d}_{f}() -> usize {{ {round} }} // some text to fill the line\n");
    line.repeat(16 + (d * 7 + f * 13) % 32)
}

fn make_project(root: &Path) {
    for d in 0..DIRS {
        let dir = root.join(format!("src/m{d:03}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..FILES {
            std::fs::write(dir.join(format!("f{f:03}.rs")), content(d, f, 0)).unwrap();
        }
    }
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::write(root.join(".gitignore"), "target/\n").unwrap();
    for i in 0..10 {
        let dir = root.join(format!("target/debug/deps{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        for j in 0..100 {
            std::fs::write(dir.join(format!("o{j}.o")), [0u8; 64]).unwrap();
        }
    }
}

/// Files written less than two seconds before a scan are read again by the next one (the stat
/// cache's racy window): wait it out so "unchanged" means unchanged.
fn settle() {
    std::thread::sleep(Duration::from_millis(2100));
}

fn store_bytes(home: &Path) -> u64 {
    fn walk(p: &Path) -> u64 {
        let mut n = 0;
        if let Ok(rd) = std::fs::read_dir(p) {
            for e in rd.flatten() {
                let m = e.metadata().unwrap();
                n += if m.is_dir() { walk(&e.path()) } else { m.len() };
            }
        }
        n
    }
    walk(&home.join("checkpoints/objects"))
}

fn manifest_bytes(p: &Project) -> u64 {
    std::fs::read_dir(p.manifests())
        .map(|rd| rd.flatten().map(|e| e.metadata().unwrap().len()).sum())
        .unwrap_or(0)
}

struct Setup {
    base: PathBuf,
    project: Project,
    root: PathBuf,
}

fn setup(base: &Path, name: &str) -> Setup {
    let base = base.join(format!("openmax-cp-bench-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let root = base.join("project");
    make_project(&root);
    let root = std::fs::canonicalize(&root).unwrap();
    let home = Home::new(base.join("home"));
    let state = ProjectState::open(&home, &root);
    Setup {
        project: Project::new(home.root(), &state, Caps::default()),
        base,
        root,
    }
}

fn main() {
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(20);
    let base = std::env::var_os("BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let none = BTreeSet::new();
    println!(
        "checkpoints of a {}-file project (+1,000 excluded), {rounds} rounds",
        DIRS * FILES
    );

    let s = setup(&base, "time");
    let p = &s.project;
    settle();
    let t = Instant::now();
    let m = p.take("bench", 1, "before", &none).unwrap();
    let first = t.elapsed();
    println!(
        "first checkpoint (every file read and stored): {} ms, {} files, {} bytes; store {} bytes",
        ms(first),
        m.files,
        m.bytes,
        store_bytes(&s.base.join("home"))
    );
    settle();
    p.take("bench", 1, "before", &none).unwrap();
    println!();
    println!("| checkpoint | n | min ms | p50 ms | p90 ms | max ms |");
    println!("|---|---|---|---|---|---|");
    let mut unchanged = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        p.take("bench", 1, "before", &none).unwrap();
        unchanged.push(t.elapsed());
    }
    summary("10,000 files, none changed", unchanged);
    let mut changed = Vec::new();
    for r in 0..rounds.min(10) {
        settle();
        p.take("bench", 1, "before", &none).unwrap();
        for f in 0..100 {
            let (d, f) = ((f * 37 + r) % DIRS, (f * 11 + r * 3) % FILES);
            std::fs::write(
                s.root.join(format!("src/m{d:03}/f{f:03}.rs")),
                content(d, f, r + 1),
            )
            .unwrap();
        }
        let t = Instant::now();
        p.take("bench", 1, "before", &none).unwrap();
        changed.push(t.elapsed());
    }
    summary("10,000 files, 100 changed", changed);
    let _ = std::fs::remove_dir_all(&s.base);

    // Store growth: 50 turns that each change one file, each with its two checkpoints.
    let s = setup(&base, "growth");
    let p = &s.project;
    let home = s.base.join("home");
    settle();
    p.take("bench", 0, "before", &none).unwrap();
    let (objects0, manifests0) = (store_bytes(&home), manifest_bytes(p));
    let mut changed_bytes = 0u64;
    for turn in 1..=50usize {
        p.take("bench", turn as u64, "before", &none).unwrap();
        let (d, f) = (turn % DIRS, (turn * 7) % FILES);
        let text = content(d, f, turn);
        changed_bytes += text.len() as u64;
        std::fs::write(s.root.join(format!("src/m{d:03}/f{f:03}.rs")), text).unwrap();
        p.take("bench", turn as u64, "after", &none).unwrap();
    }
    let objects = store_bytes(&home) - objects0;
    let manifests = manifest_bytes(p) - manifests0;
    println!();
    println!("store growth over 50 turns that each change one file (100 checkpoints):");
    println!("| | bytes |");
    println!("|---|---|");
    println!("| the first checkpoint (objects) | {objects0} |");
    println!("| the 50 changed files' new contents | {changed_bytes} |");
    println!("| objects added (contents and directory listings) | {objects} |");
    println!("| manifests added | {manifests} |");
    println!(
        "| 50 copies of the project (for comparison) | {} |",
        objects0 * 50
    );
    let _ = std::fs::remove_dir_all(&s.base);

    // Undo of a turn that changed 100 files, and its redo, alternately.
    let s = setup(&base, "undo");
    let p = &s.project;
    settle();
    let before = p.take("bench", 1, "before", &none).unwrap();
    log::append(
        &p.dir,
        "bench",
        log::Line::Before {
            turn: 1,
            cp: before.id.clone(),
            prompt: "change 100 files".into(),
            at_ms: before.at_ms,
        },
    )
    .unwrap();
    for f in 0..100 {
        let (d, f) = (f % DIRS, (f * 13) % FILES);
        std::fs::write(
            s.root.join(format!("src/m{d:03}/f{f:03}.rs")),
            content(d, f, 99),
        )
        .unwrap();
    }
    let after = p.take("bench", 1, "after", &none).unwrap();
    log::append(
        &p.dir,
        "bench",
        log::Line::After {
            turn: 1,
            cp: after.id,
            at_ms: after.at_ms,
        },
    )
    .unwrap();
    let mut undos = Vec::new();
    for _ in 0..rounds.min(10) {
        settle();
        let t = Instant::now();
        let r = undo::run(p, "bench", Pick::Last, false).unwrap();
        undos.push(t.elapsed());
        assert_eq!(r.plan.steps.len(), 100);
    }
    println!();
    println!("| undo (or redo) of a turn that changed 100 files | n | min ms | p50 ms | p90 ms | max ms |");
    println!("|---|---|---|---|---|---|");
    summary("checkpoint before, restore, checkpoint after, log", undos);
    let _ = std::fs::remove_dir_all(&s.base);
}
