//! Who runs `openmax` in a test: users run it both as root (dev containers, CI) and as an
//! ordinary user, and the sandbox is built differently for each (root needs no user namespace;
//! a user gets one), so the sandbox's tests run under both.
//!
//! When the tests run as root, the ordinary user is `openmax-e2e`, created with `useradd` the
//! first time (no home, no login shell); a [`crate::TestEnv`] handed to it with
//! [`crate::TestEnv::run_as`] gives that user its files, and every process started from it
//! runs with that user's uid and gid and no supplementary groups. When the tests run as an
//! ordinary user, that user is the only runner ([`runners`] says so, and the root half of a test
//! is skipped with a line on stderr).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The name of the ordinary user the tests create when they run as root.
pub const TEST_USER: &str = "openmax-e2e";

/// A user a test runs `openmax` as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Who {
    /// The tests' own user (root, or the ordinary user running the tests).
    Me,
    /// Another, ordinary user (the tests run as root).
    User { uid: u32, gid: u32 },
}

impl Who {
    /// Whether processes run as this user have uid 0.
    pub fn is_root(self) -> bool {
        match self {
            // SAFETY: geteuid has no preconditions.
            Who::Me => (unsafe { libc::geteuid() }) == 0,
            Who::User { .. } => false,
        }
    }

    /// A label for messages.
    pub fn label(self) -> &'static str {
        if self.is_root() {
            "as root"
        } else {
            "as an ordinary user"
        }
    }

    /// Make `cmd` run as this user.
    pub fn apply(self, cmd: &mut Command) {
        use std::os::unix::process::CommandExt;
        if let Who::User { uid, gid } = self {
            // std drops the supplementary groups when root changes uid.
            cmd.uid(uid).gid(gid);
        }
    }

    /// The `openmax` binary this user runs: the built one, or for another user a copy any user
    /// may run (the build may lie in a directory only the tests' own user can enter, such as
    /// `/root`), made once per test process.
    pub fn openmax(self) -> PathBuf {
        static COPY: OnceLock<PathBuf> = OnceLock::new();
        match self {
            Who::Me => crate::openmax_bin(),
            Who::User { .. } => COPY
                .get_or_init(|| {
                    use std::os::unix::fs::{MetadataExt, PermissionsExt};
                    let built = crate::openmax_bin();
                    let meta = std::fs::metadata(&built).expect("the built openmax");
                    let dir = Path::new("/var/tmp/openmax-e2e-bin");
                    std::fs::create_dir_all(dir).unwrap();
                    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
                    // One copy per build, shared by every test process; older builds' go.
                    let name = format!(
                        "openmax-{}-{}",
                        meta.mtime_nsec() + meta.mtime() * 1_000_000_000,
                        meta.size()
                    );
                    let bin = dir.join(&name);
                    if !bin.exists() {
                        if let Ok(rd) = std::fs::read_dir(dir) {
                            for e in rd.flatten() {
                                let old = e.metadata().ok().and_then(|m| m.modified().ok());
                                let stale = old
                                    .is_some_and(|t| t.elapsed().is_ok_and(|d| d.as_secs() > 3600));
                                if stale {
                                    let _ = std::fs::remove_file(e.path());
                                }
                            }
                        }
                        let tmp = dir.join(format!("{name}.tmp.{}", std::process::id()));
                        crate::copy_executable(&built, &tmp);
                        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755))
                            .unwrap();
                        std::fs::rename(&tmp, &bin).unwrap();
                    }
                    bin
                })
                .clone(),
        }
    }

    /// Give `path` and everything beneath it to this user.
    pub fn own(self, path: &Path) {
        let Who::User { uid, gid } = self else {
            return;
        };
        let mut stack = vec![path.to_path_buf()];
        while let Some(p) = stack.pop() {
            let _ = std::os::unix::fs::lchown(&p, Some(uid), Some(gid));
            let is_dir = std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_dir());
            if is_dir {
                if let Ok(rd) = std::fs::read_dir(&p) {
                    stack.extend(rd.flatten().map(|e| e.path()));
                }
            }
        }
    }
}

/// The ordinary test user's uid and gid, created when missing; `None` when the tests do not
/// run as root (or `useradd` is not there).
fn test_user() -> Option<(u32, u32)> {
    static USER: OnceLock<Option<(u32, u32)>> = OnceLock::new();
    *USER.get_or_init(|| {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return None;
        }
        let id = |flag: &str| -> Option<u32> {
            let out = Command::new("id").args([flag, TEST_USER]).output().ok()?;
            String::from_utf8_lossy(&out.stdout).trim().parse().ok()
        };
        if id("-u").is_none() {
            let made = Command::new("useradd")
                .args([
                    "--system",
                    "--no-create-home",
                    "--shell",
                    "/usr/sbin/nologin",
                ])
                .arg(TEST_USER)
                .output();
            match made {
                Ok(o) if o.status.success() => {}
                // Another test process made it meanwhile.
                Ok(_) if id("-u").is_some() => {}
                other => {
                    eprintln!("cannot create the test user {TEST_USER} with useradd: {other:?}");
                    return None;
                }
            }
        }
        Some((id("-u")?, id("-g")?))
    })
}

/// The users to run a sandbox test as: root and an ordinary user when the tests run as root,
/// the tests' own user otherwise.
pub fn runners() -> Vec<Who> {
    match test_user() {
        Some((uid, gid)) => vec![Who::Me, Who::User { uid, gid }],
        None => {
            eprintln!(
                "note: the tests do not run as root; the sandbox's root half is skipped (run \
                 them as root, as .ci/run does, to cover it)"
            );
            vec![Who::Me]
        }
    }
}
