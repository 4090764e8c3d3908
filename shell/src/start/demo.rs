//! The scratch project the demo runs in when `--provider demo` is given without `--project`:
//! a fresh directory under the system temp dir holding `demo.txt` ("Hello world\n") and its own
//! `$OPENMAX_HOME`, so the demo never touches the user's repository or state.
//!
//! Invariant: every call creates a new, empty directory (pid + time + counter in its name); it
//! is left in place after the run so the user can look at what the demo changed.

use std::path::PathBuf;

/// A scratch demo directory: `project` (with demo.txt and a `.openmax` marker) and `home`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DemoDirs {
    pub root: PathBuf,
    pub project: PathBuf,
    pub home: PathBuf,
}

/// The demo file's contents.
pub const DEMO_TEXT: &str = "Hello world\n";

/// Create a new scratch demo directory.
pub fn create() -> std::io::Result<DemoDirs> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let root = std::env::temp_dir().join(format!(
        "openmax-demo-{}-{nanos:08x}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let project = root.join("project");
    let home = root.join("home");
    std::fs::create_dir_all(project.join(".openmax"))?;
    crate::session::perms::private_dir_all(&home)?;
    std::fs::write(project.join("demo.txt"), DEMO_TEXT)?;
    let root = std::fs::canonicalize(root)?;
    Ok(DemoDirs {
        project: root.join("project"),
        home: root.join("home"),
        root,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn creates_fresh_dirs() {
        let a = super::create().unwrap();
        let b = super::create().unwrap();
        assert_ne!(a.root, b.root);
        assert_eq!(
            std::fs::read_to_string(a.project.join("demo.txt")).unwrap(),
            super::DEMO_TEXT
        );
        std::fs::remove_dir_all(a.root).unwrap();
        std::fs::remove_dir_all(b.root).unwrap();
    }
}
