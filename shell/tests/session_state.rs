//! Per-project state files: where they live, trust, the saved approval mode, approved source
//! hashes, and atomic replacement.

use std::fs;
use std::path::PathBuf;

use openmax_core::wire::Mode;
use openmax_shell::session::{write_atomic, Home, ProjectState};
use sha2::{Digest, Sha256};

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let p = std::env::temp_dir().join(format!(
            "openmax-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).expect("temp dir is creatable");
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn sha_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn project_dir_is_name_and_hash_of_the_canonical_path() {
    let t = TempDir::new("statedir");
    let project = t.0.join("my-proj");
    fs::create_dir_all(&project).expect("mkdir");
    let link = t.0.join("link");
    std::os::unix::fs::symlink(&project, &link).expect("symlink");
    let home = Home::new(t.0.join("home"));
    let a = ProjectState::open(&home, &project);
    let b = ProjectState::open(&home, &link);
    assert_eq!(a.dir(), b.dir(), "symlinks resolve to one state dir");
    let canonical = fs::canonicalize(&project).expect("canonical");
    let hex = sha_hex(canonical.to_str().expect("utf-8").as_bytes());
    assert_eq!(
        a.dir(),
        home.root()
            .join("projects")
            .join(format!("my-proj-{}", &hex[..12]))
    );
    assert_eq!(home.config_path(), t.0.join("home/config.toml"));
    // Opening creates nothing; nothing is ever written into the project.
    assert!(!a.dir().exists());
    a.set_trusted().expect("trust");
    assert_eq!(fs::read_dir(&project).expect("dir").count(), 0);
}

#[test]
fn trust_mode_and_approvals_persist_across_opens() {
    let t = TempDir::new("state");
    let project = t.0.join("p");
    fs::create_dir_all(&project).expect("mkdir");
    let home = Home::new(t.0.join("home"));
    let s = ProjectState::open(&home, &project);
    assert!(!s.trusted());
    assert_eq!(s.mode(), None);
    s.set_trusted().expect("trust");
    s.save_mode(Mode::Readonly).expect("save");
    let sha = sha_hex(b"#!/bin/sh\necho hi\n");
    assert!(!s.source_approved(".openmax/tools/hi.json", &sha));
    s.approve_source(".openmax/tools/hi.json", &sha)
        .expect("approve");
    s.approve_source(".openmax/tools/hi.json", &sha)
        .expect("approve twice is fine");

    let s2 = ProjectState::open(&home, &project);
    assert!(s2.trusted());
    assert_eq!(s2.mode(), Some(Mode::Readonly));
    assert!(s2.source_approved(".openmax/tools/hi.json", &sha));
    assert!(s2.source_approved(".openmax/tools/hi.json", &sha.to_uppercase()));
    // Other bytes, or the same bytes at another path, are not approved.
    assert!(!s2.source_approved(".openmax/tools/hi.json", &sha_hex(b"changed")));
    assert!(!s2.source_approved(".openmax/tools/other.json", &sha));
    // A short sha is refused rather than stored.
    assert!(s2.approve_source("x", &sha[..12]).is_err());
    s2.save_mode(Mode::Auto).expect("save");
    assert_eq!(ProjectState::open(&home, &project).mode(), Some(Mode::Auto));
    // Two approvals for two files both stay.
    let sha2 = sha_hex(b"other");
    s2.approve_source("b.sh", &sha2).expect("approve");
    assert!(s.source_approved("b.sh", &sha2));
    assert!(s.source_approved(".openmax/tools/hi.json", &sha));
    // A different project has its own state.
    let other = t.0.join("q");
    fs::create_dir_all(&other).expect("mkdir");
    let o = ProjectState::open(&home, &other);
    assert!(!o.trusted());
    assert_eq!(o.mode(), None);
    assert!(!o.source_approved("b.sh", &sha2));
}

#[test]
fn corrupt_state_files_read_as_unset() {
    let t = TempDir::new("statecorrupt");
    let home = Home::new(t.0.join("home"));
    let s = ProjectState::open(&home, &t.0);
    fs::create_dir_all(s.dir()).expect("mkdir");
    fs::write(s.dir().join("trust.json"), b"{\"v\":1,\"trus").expect("write");
    fs::write(
        s.dir().join("mode.json"),
        b"{\"v\":1,\"mode\":\"yolo\",\"at_ms\":0}",
    )
    .expect("write");
    assert!(!s.trusted());
    assert_eq!(s.mode(), None);
    s.set_trusted().expect("trust replaces it");
    assert!(s.trusted());
}

#[test]
fn write_atomic_replaces_whole_and_leaves_no_temp() {
    let t = TempDir::new("atomic");
    let path = t.0.join("f.json");
    write_atomic(&path, b"one").expect("write");
    write_atomic(&path, b"two, longer").expect("write");
    assert_eq!(fs::read(&path).expect("read"), b"two, longer");
    let names: Vec<String> = fs::read_dir(&t.0)
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["f.json".to_string()]);
    // Into a missing directory: an error, nothing created.
    assert!(write_atomic(&t.0.join("missing/f.json"), b"x").is_err());
}

/// A bare file name is written in the working directory, like any relative path. (The only
/// test here that changes the working directory: every other one uses absolute paths.)
#[test]
fn write_atomic_takes_a_bare_file_name_in_the_working_directory() {
    let t = TempDir::new("bare");
    let before = std::env::current_dir().expect("cwd");
    std::env::set_current_dir(&t.0).expect("chdir");
    let r = write_atomic(std::path::Path::new("bare.json"), b"{}");
    std::env::set_current_dir(before).expect("chdir back");
    r.expect("write");
    assert_eq!(fs::read(t.0.join("bare.json")).expect("read"), b"{}");
}
