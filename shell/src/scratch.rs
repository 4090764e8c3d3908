//! Test-only: where a unit test keeps its scratch files. One name per test, user and process
//! under the system's temporary directory, so a run as root killed midway (as mutation runs are)
//! leaves nothing an unprivileged run of the same tests could collide with.

use std::path::PathBuf;

/// `$TMPDIR/omx-<name>-u<euid>-<pid>`: the caller creates, fills and removes it.
pub fn path(name: &str) -> PathBuf {
    // SAFETY: geteuid cannot fail and touches no memory.
    let uid = unsafe { libc::geteuid() };
    std::env::temp_dir().join(format!("omx-{name}-u{uid}-{}", std::process::id()))
}

mod tests {
    #[test]
    fn a_name_is_the_users_and_the_processes_own() {
        let p = super::path("x");
        // SAFETY: as above.
        let uid = unsafe { libc::geteuid() };
        assert_eq!(p.parent(), Some(std::env::temp_dir().as_path()));
        assert_eq!(
            p.file_name().unwrap().to_str().unwrap(),
            format!("omx-x-u{uid}-{}", std::process::id())
        );
        assert_ne!(super::path("y"), p);
    }
}
