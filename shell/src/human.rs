//! Whether a human is at the controls: the precondition of `--trust` and `--approve`.
//!
//! Three checks, each a refusal with its reason: `OPENMAX_AGENT_SESSION` is not set (a
//! courtesy an agent can unset), stdin is a terminal, and no ancestor process is an openmax
//! (the same executable, or a process named `openmax`: every session names its main thread so,
//! [`mark_session`], whatever its executable is called, and so does the sandbox helper, whose
//! first process is pid 1 of the sandbox's pid namespace). Because a running openmax is a child
//! subreaper, a process the agent started stays its descendant even after `setsid` or a double
//! fork. This is defence in depth: the boundary itself is that agent processes run without
//! access to `$OPENMAX_HOME` (see docs/security.md).

use std::os::unix::fs::MetadataExt;

/// The variable whose presence marks an agent-spawned openmax (every agent process gets it).
pub const AGENT_ENV: &str = "OPENMAX_AGENT_SESSION";

/// The name a session's openmax gives its main thread (its `/proc/<pid>/comm`), whatever the
/// executable is called: the mark [`check`] looks for in ancestors. (A session is not
/// dumpable, so its `/proc/<pid>/exe` cannot be read by other processes of a non-root user.)
pub const SESSION_NAME: &str = "openmax";

/// Mark this process as an openmax session (see [`SESSION_NAME`]).
pub fn mark_session() {
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes; the literal is.
    unsafe {
        libc::prctl(libc::PR_SET_NAME, c"openmax".as_ptr(), 0, 0, 0);
    }
}

/// `Ok` when a human runs this command; otherwise the reason to print.
pub fn check(flag: &str) -> Result<(), String> {
    if std::env::var_os(AGENT_ENV).is_some() {
        return Err(format!(
            "{flag} refused: this openmax was started by an agent ({AGENT_ENV} is set); \
             a human must run it"
        ));
    }
    // SAFETY: isatty only inspects the descriptor.
    if unsafe { libc::isatty(0) } != 1 {
        return Err(format!(
            "{flag} refused: stdin is not a terminal; a human must run it from a terminal \
             (for unattended setups, list the project under [trust] projects in {})",
            crate::session::shown("config.toml")
        ));
    }
    if let Some((pid, what)) = openmax_ancestor() {
        return Err(format!(
            "{flag} refused: it runs under an openmax session (ancestor process {pid}: {what}); \
             a human must run it outside openmax"
        ));
    }
    Ok(())
}

/// The nearest ancestor that is an openmax, with how it was recognised.
fn openmax_ancestor() -> Option<(i32, String)> {
    let me = std::fs::metadata("/proc/self/exe").ok();
    nearest_ancestor(std::process::id() as i32, parent, |pid| {
        if let (Some(me), Ok(exe)) = (&me, std::fs::metadata(format!("/proc/{pid}/exe"))) {
            if exe.dev() == me.dev() && exe.ino() == me.ino() {
                return Some("the same openmax executable".to_string());
            }
        }
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        (comm.trim_end() == SESSION_NAME).then(|| "a process named openmax".to_string())
    })
}

/// The nearest ancestor of `pid` that `recognise` names, walking up by `parent`.
fn nearest_ancestor(
    pid: i32,
    parent: impl Fn(i32) -> Option<i32>,
    recognise: impl Fn(i32) -> Option<String>,
) -> Option<(i32, String)> {
    let mut pid = parent(pid)?;
    // Bounded: a pid chain always ends at 1 (or at 0 outside our pid namespace).
    for _ in 0..4096 {
        // Outside our pid namespace the chain ends at 0. Pid 1 is looked at too: in the
        // sandbox's pid namespace it is the sandbox's first process, an openmax.
        if pid < 1 {
            return None;
        }
        if let Some(how) = recognise(pid) {
            return Some((pid, how));
        }
        if pid == 1 {
            return None;
        }
        pid = parent(pid)?;
    }
    None
}

fn parent(pid: i32) -> Option<i32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("PPid:"))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_test_runner_has_its_parent_and_no_openmax_ancestor() {
        let ppid = unsafe { libc::getppid() };
        assert_eq!(parent(std::process::id() as i32), Some(ppid));
        assert_eq!(parent(ppid).map(|p| p >= 0), Some(true));
        assert_eq!(openmax_ancestor(), None);
    }

    /// A process whose parent runs the same executable finds it by that (the test binary
    /// starts itself: the child's parent is this very executable, named otherwise).
    #[test]
    fn an_ancestor_running_the_same_executable_is_an_openmax() {
        if std::env::var_os("OPENMAX_TEST_ANCESTOR_PROBE").is_some() {
            // The child: print what it finds.
            println!("probe: {:?}", openmax_ancestor());
            return;
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "human::tests::an_ancestor_running_the_same_executable_is_an_openmax",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("OPENMAX_TEST_ANCESTOR_PROBE", "1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let want = format!(
            "probe: Some(({}, \"the same openmax executable\"))",
            std::process::id()
        );
        assert!(stdout.contains(&want), "{stdout}");
    }

    /// `mark_session` names the thread that calls it (a session calls it on its main thread,
    /// which names the process): `openmax`, what the ancestor check looks for.
    #[test]
    fn a_marked_session_is_named_openmax() {
        let comm = || std::fs::read_to_string("/proc/thread-self/comm").unwrap();
        let (before, after) = std::thread::spawn(move || {
            let before = comm();
            mark_session();
            (before, comm())
        })
        .join()
        .unwrap();
        assert_ne!(
            before.trim(),
            SESSION_NAME,
            "the control: not named so before"
        );
        assert_eq!(after.trim(), SESSION_NAME);
    }

    /// The walk over a process table: (pid, parent, is an openmax).
    fn walk(table: &[(i32, i32, bool)], from: i32) -> Option<(i32, String)> {
        let row = |pid: i32| table.iter().find(|r| r.0 == pid).copied();
        nearest_ancestor(
            from,
            |pid| row(pid).map(|r| r.1),
            |pid| row(pid).filter(|r| r.2).map(|_| format!("openmax {pid}")),
        )
    }

    #[test]
    fn the_nearest_openmax_ancestor_is_found_and_pid_1_is_looked_at() {
        // A shell (30) under a helper (20) under an openmax (10) under init (1).
        let host = [
            (30, 20, false),
            (20, 10, false),
            (10, 1, true),
            (1, 0, false),
        ];
        assert_eq!(walk(&host, 30), Some((10, "openmax 10".into())));
        // The nearest one wins.
        let nested = [
            (30, 20, false),
            (20, 10, true),
            (10, 1, true),
            (1, 0, false),
        ];
        assert_eq!(walk(&nested, 30).map(|a| a.0), Some(20));
        // In the sandbox's pid namespace the openmax is pid 1 and its parent reads as 0.
        let sandbox = [(7, 3, false), (3, 1, false), (1, 0, true)];
        assert_eq!(walk(&sandbox, 7).map(|a| a.0), Some(1));
        // The process itself is not its own ancestor.
        let itself = [(7, 1, true), (1, 0, false)];
        assert_eq!(walk(&itself, 7), None);
        // No openmax up to init, a chain cut off at 0, and an unreadable parent.
        assert_eq!(walk(&[(30, 1, false), (1, 0, false)], 30), None);
        assert_eq!(walk(&[(30, 0, false)], 30), None);
        assert_eq!(walk(&[(30, 20, false)], 30), None);
        // Init itself is not climbed past, whatever its table says.
        assert_eq!(
            walk(&[(30, 1, false), (1, 5, false), (5, 0, true)], 30),
            None
        );
        // A cycle (a table read while pids were reused) ends.
        assert_eq!(walk(&[(30, 20, false), (20, 30, false)], 30), None);
    }
}
