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
    let mut pid = parent(std::process::id() as i32)?;
    // Bounded: a pid chain always ends at 1 (or at 0 outside our pid namespace).
    for _ in 0..4096 {
        // Outside our pid namespace the chain ends at 0. Pid 1 is looked at too: in the
        // sandbox's pid namespace it is the sandbox's first process, an openmax.
        if pid < 1 {
            return None;
        }
        if let (Some(me), Ok(exe)) = (&me, std::fs::metadata(format!("/proc/{pid}/exe"))) {
            if exe.dev() == me.dev() && exe.ino() == me.ino() {
                return Some((pid, "the same openmax executable".to_string()));
            }
        }
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if comm.trim_end() == SESSION_NAME {
            return Some((pid, "a process named openmax".to_string()));
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
    fn the_test_runner_has_a_parent_and_no_openmax_ancestor() {
        assert!(parent(std::process::id() as i32).is_some());
        assert_eq!(openmax_ancestor(), None);
    }
}
