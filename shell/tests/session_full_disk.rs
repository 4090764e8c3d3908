//! A record append that fails halfway (a full disk, a file-size limit) loses nothing and
//! corrupts nothing: the failed append's partial bytes are cut off, the append is reported
//! failed, and later appends and a resume read exactly the appends that succeeded.
//!
//! The failure is a real short write: this test executable is re-run as a child with
//! `OPENMAX_TEST_FULL_DISK_CHILD=<dir>`, which lowers its own soft `RLIMIT_FSIZE` (SIGXFSZ
//! ignored, so the write fails with EFBIG instead of killing it) just above the record's size
//! before one large append, then raises it again.

use std::path::{Path, PathBuf};
use std::process::Command;

use openmax_core::conversation::Message;
use openmax_core::record::Record;
use openmax_shell::session::{resume_latest, Home, ProjectState, SessionWriter};

const CHILD_ENV: &str = "OPENMAX_TEST_FULL_DISK_CHILD";
const TEST_NAME: &str = "a_short_write_is_cut_off_and_later_appends_read_back";

fn state_at(dir: &Path) -> ProjectState {
    ProjectState::open(&Home::new(dir.join("home")), &dir.join("proj"))
}

fn header(id: &str) -> Record {
    Record::Session {
        session_id: id.to_string(),
        project: "/p".to_string(),
        system: "sys".to_string(),
        tools: vec![],
    }
}

fn msg(text: &str) -> Record {
    Record::Message {
        message: Message::user_text(text),
    }
}

fn set_file_limit(bytes: libc::rlim_t) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid struct; this child runs this test alone.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_FSIZE, &mut lim), 0);
        lim.rlim_cur = bytes.min(lim.rlim_max);
        assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &lim), 0);
    }
}

/// The child: one good append, one that runs into the limit halfway, one good append again.
fn child(dir: &Path) {
    // SAFETY: ignoring SIGXFSZ has no preconditions.
    unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
    let state = state_at(dir);
    let mut w = SessionWriter::create(&state, "s", header("s")).expect("create");
    w.append(&[msg("before")]).expect("append before");
    let record = state.sessions_dir().join("s.jsonl");
    let len = std::fs::metadata(&record).expect("record").len();
    set_file_limit(len + 100);
    let big = "x".repeat(10_000);
    let failed = w.append(&[msg(&big)]);
    set_file_limit(libc::RLIM_INFINITY);
    let err = failed.expect_err("the append past the limit fails");
    println!("failed: {err}");
    assert_eq!(
        std::fs::metadata(&record).expect("record").len(),
        len,
        "the partial bytes are cut off"
    );
    w.append(&[msg("after")]).expect("append after");
    drop(w);
    println!("child done");
}

#[test]
fn a_short_write_is_cut_off_and_later_appends_read_back() {
    if let Some(dir) = std::env::var_os(CHILD_ENV) {
        child(Path::new(&dir));
        return;
    }
    let dir: PathBuf =
        std::env::temp_dir().join(format!("openmax-full-disk-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("proj")).expect("mkdir");
    let out = Command::new(std::env::current_exe().expect("test exe"))
        .args(["--exact", TEST_NAME, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, &dir)
        .output()
        .expect("the child runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("child done"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("failed: "), "{stdout}");
    let r = resume_latest(&state_at(&dir)).expect("the record reads back");
    assert!(r.notices.is_empty(), "{:?}", r.notices);
    assert_eq!(
        r.history,
        vec![Message::user_text("before"), Message::user_text("after")]
    );
    drop(r);
    std::fs::remove_dir_all(&dir).unwrap();
}
