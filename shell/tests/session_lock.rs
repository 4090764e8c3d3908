//! Single ownership across processes: a live child owning a session locks out the parent, and
//! once the child is killed with SIGKILL its lock file is not an owner.
//!
//! The child is this test executable re-run with `OPENMAX_TEST_LOCK_CHILD=<dir>`: it resumes
//! the session there, prints `owned <pid>`, and waits on stdin forever.

use std::fs;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use openmax_core::conversation::Message;
use openmax_core::record::Record;
use openmax_shell::session::{resume_latest, Home, ProjectState, ResumeError, SessionWriter};

const CHILD_ENV: &str = "OPENMAX_TEST_LOCK_CHILD";

fn state_at(dir: &Path) -> ProjectState {
    ProjectState::open(&Home::new(dir.join("home")), &dir.join("proj"))
}

#[test]
fn lock_of_a_killed_process_is_not_an_owner() {
    if let Some(dir) = std::env::var_os(CHILD_ENV) {
        // Child: take ownership and hold it until killed.
        let r = resume_latest(&state_at(Path::new(&dir))).expect("child resumes");
        println!("owned {}", std::process::id());
        let mut sink = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut sink);
        drop(r);
        return;
    }
    let dir: PathBuf =
        std::env::temp_dir().join(format!("openmax-lockchild-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(dir.join("proj")).expect("mkdir");
    let state = state_at(&dir);
    let mut w = SessionWriter::create(
        &state,
        "s",
        Record::Session {
            session_id: "s".into(),
            project: "/p".into(),
            system: "sys".into(),
            tools: vec![],
        },
    )
    .expect("create");
    w.append(&[Record::Message {
        message: Message::user_text("hi"),
    }])
    .expect("append");
    drop(w);

    let mut child = Command::new(std::env::current_exe().expect("test exe"))
        .args([
            "lock_of_a_killed_process_is_not_an_owner",
            "--exact",
            "--nocapture",
        ])
        .env(CHILD_ENV, &dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn child");
    let mut out = BufReader::new(child.stdout.take().expect("piped"));
    let mut line = String::new();
    let pid = loop {
        line.clear();
        let n = out.read_line(&mut line).expect("read child");
        assert!(n > 0, "child exited before owning the session");
        if let Some(pid) = line.trim().strip_prefix("owned ") {
            break pid.to_string();
        }
    };
    let err = resume_latest(&state).expect_err("child owns it");
    let ResumeError::Locked(m) = &err else {
        panic!("expected Locked, got {err:?}");
    };
    assert!(m.contains(&format!("pid {pid}")), "{m}");

    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    // The lock file is still there with the dead pid in it, but it owns nothing.
    let lock = state.sessions_dir().join("s.lock");
    assert_eq!(fs::read_to_string(&lock).expect("lock file").trim(), pid);
    let r = resume_latest(&state).expect("resume after the owner died");
    assert_eq!(r.history, vec![Message::user_text("hi")]);
    drop(r);
    let _ = fs::remove_dir_all(&dir);
}
