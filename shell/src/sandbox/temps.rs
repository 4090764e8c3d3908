//! The sessions' private temp directories on the host (`openmax-agent-<pid>-<nanos>-<n>` under
//! the system temp directory): made for each session's sandbox, removed with it, and removed at
//! the process's exit even when something still holds the sandbox (a task that outlived the
//! session keeps its `Arc`, and `std::process::exit` runs no destructor). What a killed openmax
//! left behind is removed by the next session that starts: a directory of this user's whose pid
//! no longer runs.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The name every private temp directory starts with.
const PREFIX: &str = "openmax-agent-";

/// The directories this process made and has not removed yet.
static MADE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// A fresh directory only this user can enter, under `system_tmp`; remembered for
/// [`remove_all`].
pub fn make(system_tmp: &Path) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = system_tmp.join(format!("{PREFIX}{}-{nanos:08x}-{n}", std::process::id()));
    std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
    lock().push(dir.clone());
    Ok(dir)
}

fn lock() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    MADE.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Remove one directory [`make`] made (its sandbox is dropped).
pub fn remove(dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
    lock().retain(|d| d != dir);
}

/// Remove every directory this process made and still has: called just before it exits.
pub fn remove_all() {
    for dir in std::mem::take(&mut *lock()) {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// [`remove_orphans`] once per process, before its first session's sandbox (an ACP process
/// opens many sessions; the temp directory is read once).
pub fn remove_orphans_once(system_tmp: &Path) {
    static DONE: std::sync::Once = std::sync::Once::new();
    DONE.call_once(|| {
        remove_orphans(system_tmp);
    });
}

/// Remove this user's private temp directories under `system_tmp` whose openmax no longer
/// runs (killed before it could remove them); returns how many. A directory of a live pid is
/// kept, whatever that process is now.
pub fn remove_orphans(system_tmp: &Path) -> usize {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let Ok(entries) = std::fs::read_dir(system_tmp) else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        // A directory entry's metadata is not followed: a symlink is not a directory here.
        let ours = e.metadata().is_ok_and(|m| m.is_dir() && m.uid() == me);
        if ours
            && !Path::new(&format!("/proc/{pid}")).exists()
            && std::fs::remove_dir_all(e.path()).is_ok()
        {
            removed += 1;
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_directories_go_at_exit_and_orphans_of_dead_pids_at_the_next_start() {
        let base = crate::scratch::path("temps");
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(&base).unwrap();
        let a = make(&base).unwrap();
        let b = make(&base).unwrap();
        std::fs::write(a.join("f"), "x").unwrap();
        remove(&b);
        assert!(!b.exists() && a.exists());
        remove_all();
        assert!(!a.exists(), "remove_all removes what is left");
        // A killed openmax's directory (a pid that no longer runs) beside a live one's (ours)
        // and a name that is not one.
        let dead = base.join(format!("{PREFIX}4194304-0000abcd-0"));
        let live = base.join(format!("{PREFIX}{}-0000abcd-7", std::process::id()));
        let other = base.join("openmax-agent-notapid");
        for d in [&dead, &live, &other] {
            std::fs::create_dir_all(d.join("sub")).unwrap();
        }
        // Another user's directory of a dead pid is not ours to remove (as root, the only
        // user that could remove it, and the only one that can make one to test with).
        let foreign = base.join(format!("{PREFIX}4194305-0000abcd-0"));
        std::fs::create_dir_all(&foreign).unwrap();
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        if root {
            std::os::unix::fs::chown(&foreign, Some(65534), Some(65534)).unwrap();
        }
        assert_eq!(remove_orphans(&base), if root { 1 } else { 2 });
        assert!(!dead.exists() && live.exists() && other.exists());
        assert_eq!(foreign.exists(), root, "another user's directory stays");
        std::fs::remove_dir_all(&base).unwrap();
    }
}
