//! Every hand-written scenario under `sim/scenarios/` (and every regression scenario under
//! `sim/scenarios/regressions/`) runs through the core, passes every check, and (for the
//! hand-written ones) produces exactly its checked-in `<name>.golden.jsonl` wire.
//!
//! `UPDATE_GOLDEN=1 cargo test -p openmax-sim --test golden` rewrites the goldens; review each
//! one by eye against the contract before committing it.

use std::path::{Path, PathBuf};

use openmax_sim::scenario::Scenario;
use openmax_sim::{checks, driver};

fn scenario_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "json"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios")
}

fn load(path: &Path) -> Scenario {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Scenario::from_json(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn every_scenario_matches_its_golden_and_holds() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let files = scenario_files(&root());
    assert!(
        files.len() >= 30,
        "expected the hand-written scenarios, found {}",
        files.len()
    );
    let mut failures = Vec::new();
    for path in &files {
        let sc = load(path);
        let run = driver::run(&sc);
        let wire = run.wire_text();
        let golden = path.with_extension("golden.jsonl");
        if update {
            std::fs::write(&golden, &wire).expect("write golden");
        } else {
            match std::fs::read_to_string(&golden) {
                Ok(want) if want == wire => {}
                Ok(want) => failures.push(format!(
                    "{}: wire differs from golden\n--- golden\n{want}--- got\n{wire}",
                    path.display()
                )),
                Err(e) => failures.push(format!("{}: {e}", golden.display())),
            }
        }
        for v in checks::check_all(&sc, &run) {
            failures.push(format!("{}: {v}", path.display()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn regression_scenarios_hold() {
    let mut failures = Vec::new();
    for path in scenario_files(&root().join("regressions")) {
        let sc = load(&path);
        let run = driver::run(&sc);
        let live = sc.steps.iter().any(|s| {
            matches!(&s.action, openmax_sim::scenario::Action::User { text } if text == openmax_sim::gen::LIVENESS_PROMPT)
        });
        let mut v: Vec<String> = checks::check_all(&sc, &run)
            .iter()
            .map(|v| v.to_string())
            .collect();
        if live {
            v.extend(checks::liveness_after_faults(&sc, &run));
        }
        for m in v {
            failures.push(format!("{}: {m}", path.display()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn same_scenario_twice_is_byte_identical() {
    for path in scenario_files(&root()) {
        let sc = load(&path);
        let a = driver::run(&sc);
        let b = driver::run(&sc);
        assert_eq!(a.wire_text(), b.wire_text(), "{}", path.display());
        assert_eq!(a.listing(), b.listing(), "{}", path.display());
    }
    for k in 0..200 {
        let (sc, _) = openmax_sim::explore::case(11, k);
        assert_eq!(driver::run(&sc).listing(), driver::run(&sc).listing());
    }
}
