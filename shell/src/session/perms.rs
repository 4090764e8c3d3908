//! `$OPENMAX_HOME` is the user's alone, as ssh requires of `~/.ssh`: openmax creates its
//! directories `0700` and its files `0600` whatever the umask, and refuses to start when
//! `$OPENMAX_HOME`, its `config.toml`, or the project's state (trust, mode, approvals, the
//! session index) can be changed by another user: a group- or world-writable file there, or
//! one owned by someone else, lets that user turn the sandbox off or approve code for the next
//! session. The refusal names the file and the command that fixes it.

use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

/// Create `dir` and its missing parents, each `0700`.
pub fn private_dir_all(dir: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Open options that create a file `0600`.
pub fn private_file() -> std::fs::OpenOptions {
    let mut o = std::fs::OpenOptions::new();
    o.mode(0o600);
    o
}

/// Whether a file owned by `owner` may be trusted by the user `me`: their own, or root's.
fn may_own(owner: u32, me: u32) -> bool {
    owner == me || owner == 0
}

/// Why `path` (when it exists) is not the user's alone, with the fix.
fn judge(path: &Path, what: &str) -> Result<(), String> {
    // Followed: a `$OPENMAX_HOME` that is a symlink is judged by what it points to.
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(());
    };
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let p = path.display();
    if !may_own(meta.uid(), me) {
        return Err(format!(
            "{what} ({p}) is owned by uid {}, not by you (uid {me}): that user could change \
             what openmax runs and allows; fix it with: chown {me} {p}",
            meta.uid()
        ));
    }
    let mode = meta.mode() & 0o777;
    if mode & 0o022 != 0 {
        return Err(format!(
            "{what} ({p}) is writable by {} (mode {mode:04o}): another user could turn the \
             sandbox off or approve code for your next session; fix it with: chmod go-w {p}",
            if mode & 0o002 != 0 {
                "every user"
            } else {
                "its group"
            }
        ));
    }
    Ok(())
}

/// Refuse a `$OPENMAX_HOME` (`home`) or project state directory (`state`) another user can
/// change.
pub fn check(home: &Path, state: Option<&Path>) -> Result<(), String> {
    judge(home, "$OPENMAX_HOME")?;
    judge(&home.join("config.toml"), "$OPENMAX_HOME/config.toml")?;
    judge(&home.join("projects"), "$OPENMAX_HOME/projects")?;
    if let Some(state) = state {
        judge(state, "the project's state directory")?;
        for name in [
            "trust.json",
            "mode.json",
            "approvals.json",
            "sessions",
            "sessions/index.json",
        ] {
            judge(&state.join(name), &format!("the project's {name}"))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn group_or_world_writable_state_is_refused_with_the_fix() {
        let dir = crate::scratch::path("perms");
        let _ = std::fs::remove_dir_all(&dir);
        let state = dir.join("projects/p-1");
        private_dir_all(&state).unwrap();
        assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
        assert_eq!(std::fs::metadata(&state).unwrap().mode() & 0o777, 0o700);
        private_file()
            .write(true)
            .create_new(true)
            .open(dir.join("config.toml"))
            .unwrap();
        assert_eq!(
            std::fs::metadata(dir.join("config.toml")).unwrap().mode() & 0o777,
            0o600
        );
        assert_eq!(check(&dir, Some(&state)), Ok(()));
        let set = |p: &Path, m: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap()
        };
        for (p, m, who) in [
            (dir.clone(), 0o777, "every user"),
            (dir.join("config.toml"), 0o666, "every user"),
            (dir.join("config.toml"), 0o620, "its group"),
            (state.clone(), 0o770, "its group"),
        ] {
            let before = std::fs::metadata(&p).unwrap().mode() & 0o777;
            set(&p, m);
            let e = check(&dir, Some(&state)).unwrap_err();
            assert!(
                e.contains(&p.display().to_string())
                    && e.contains(who)
                    && e.contains(&format!("chmod go-w {}", p.display())),
                "{e}"
            );
            set(&p, before);
        }
        std::fs::write(state.join("mode.json"), "{}").unwrap();
        set(&state.join("mode.json"), 0o646);
        assert!(check(&dir, Some(&state)).unwrap_err().contains("mode.json"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_file_is_trusted_when_its_owner_is_the_user_or_root() {
        // (owner, me, trusted), for root and for an ordinary user.
        for (owner, me, trusted) in [
            (0, 0, true),
            (4242, 0, false),
            (1000, 1000, true),
            (0, 1000, true),
            (4242, 1000, false),
            (1000, 4242, false),
        ] {
            assert_eq!(may_own(owner, me), trusted, "owner {owner}, user {me}");
        }
    }

    #[test]
    fn only_what_the_user_or_root_owns_is_accepted() {
        // Root's own (`/`, mode 0755) is accepted whoever runs openmax.
        assert_eq!(judge(Path::new("/"), "$OPENMAX_HOME"), Ok(()));
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("note: not root; a file of another user's cannot be made here");
            return;
        }
        let dir = crate::scratch::path("perms-owner");
        let _ = std::fs::remove_dir_all(&dir);
        private_dir_all(&dir).unwrap();
        assert_eq!(judge(&dir, "$OPENMAX_HOME"), Ok(()));
        std::os::unix::fs::chown(&dir, Some(4242), None).unwrap();
        let e = judge(&dir, "$OPENMAX_HOME").unwrap_err();
        assert!(
            e.contains("owned by uid 4242") && e.contains(&format!("chown 0 {}", dir.display())),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
