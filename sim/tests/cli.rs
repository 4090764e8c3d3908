//! The `openmax-sim` binary: `run` prints the wire and exits 0 on a scenario that holds, 1 on
//! one whose golden does not match; `explore` runs seeded cases and reports none violated.

use std::process::Command;

fn sim() -> Command {
    Command::new(env!("CARGO_BIN_EXE_openmax-sim"))
}

fn scenarios() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios")
}

#[test]
fn run_prints_the_wire_and_holds() {
    let out = sim()
        .arg("run")
        .arg(scenarios().join("turn_truncated_abort.json"))
        .output()
        .expect("run openmax-sim");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains(r#""type":"hello""#), "{stdout}");
    assert!(stdout.contains(r#""stop_reason":"truncated""#), "{stdout}");
    assert!(!stdout.contains("VIOLATION"), "{stdout}");
}

#[test]
fn run_reports_a_golden_mismatch() {
    let dir = std::env::temp_dir().join(format!("openmax-sim-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        scenarios().join("turn_normal.json"),
        dir.join("turn_normal.json"),
    )
    .unwrap();
    std::fs::write(dir.join("turn_normal.golden.jsonl"), "{}\n").unwrap();
    let out = sim()
        .arg("run")
        .arg(dir.join("turn_normal.json"))
        .output()
        .expect("run openmax-sim");
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("VIOLATION [golden]"), "{stdout}");
}

#[test]
fn explore_is_seeded_and_clean() {
    let run = || {
        sim()
            .args(["explore", "--seed", "3", "--cases", "200"])
            .output()
            .expect("run openmax-sim")
    };
    let out = run();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("0 properties violated"), "{stdout}");
}

#[test]
fn bad_usage_exits_2() {
    let out = sim().arg("fly").output().expect("run openmax-sim");
    assert_eq!(out.status.code(), Some(2));
}
