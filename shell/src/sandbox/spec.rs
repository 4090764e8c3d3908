//! What an agent process may do ([`ConfineSpec`]), as openmax decides it and the sandbox
//! helper is told it, with the facts both sides share: the messages of an unavailable sandbox,
//! the simulation switch of the tests, the kernel's Landlock ABI, and what a plain absolute
//! path is. Neither [`super::confine`] (which starts processes through the helper) nor
//! [`super::helper`] (which builds the sandbox) is needed to read it.

use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

/// What a human can do when the sandbox cannot be had, appended to every such message.
pub const OPT_OUT: &str = "openmax refuses to run agent processes unconfined (a human can set \
                           [sandbox] mode = \"off\" in $OPENMAX_HOME/config.toml to run them \
                           without the sandbox)";

/// The start of the message when the sandbox cannot be had.
pub const UNAVAILABLE: &str = "the sandbox is unavailable";

/// Set to `no-landlock` to make openmax behave as on a kernel without Landlock, or
/// `no-namespaces` as on one where namespaces cannot be made (for testing the fail-closed
/// path; it can only make openmax stricter: agent processes are then refused unless the user
/// config says `[sandbox] mode = "off"`).
pub const SIMULATE_ENV: &str = "OPENMAX_SANDBOX_SIMULATE";

/// The message for a kernel without Landlock.
pub fn no_landlock() -> String {
    format!(
        "{UNAVAILABLE}: this kernel offers no Landlock, so agent processes cannot be kept out of \
         $OPENMAX_HOME and outside the project; {}",
        OPT_OUT
    )
}

/// What an agent process may do, as the helper is told (JSON on its command line).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfineSpec {
    /// The project root (canonical): writable, or read-only in the read-only sandbox.
    pub project: PathBuf,
    /// More directories writable beneath (canonical; `[sandbox] writable`).
    pub writable: Vec<PathBuf>,
    /// The session's private temp directory on the host (canonical).
    pub tmp: PathBuf,
    /// Where the sandbox shows `tmp`: `/tmp` and the system temp directory.
    pub tmp_at: Vec<PathBuf>,
    /// Whether network sockets are allowed (`[sandbox] network = true`).
    pub network: bool,
    /// The read-only sandbox of `readonly` mode: only `tmp` writable, no sockets at all.
    pub read_only: bool,
    /// Entries of the project held read-only (`[sandbox] protected`).
    pub protected: Vec<String>,
    /// Unix sockets outside the sandbox it may connect to (`[sandbox] unix_sockets`).
    pub unix_sockets: Vec<PathBuf>,
    /// Whether the kernel offers Landlock (false only when simulated away or absent).
    pub landlock: bool,
    /// [`SIMULATE_ENV`] as openmax saw it.
    pub simulate: Option<String>,
    /// The descriptor the helper inherits the read end of openmax's lifeline on
    /// ([`super::lifeline`]): set per process started, not a permission.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifeline: Option<i32>,
}

fn canon(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

impl ConfineSpec {
    /// Writes allowed under `project` and the private temp directory `private_tmp`, shown at
    /// `/tmp` and at `system_tmp`. Refuses a layout the sandbox cannot protect `home` in
    /// (`home` inside the project or the private temp directory, or the project inside
    /// `home`). [`ConfineSpec::allow_write`] adds the user's directories.
    pub fn new(
        project: &Path,
        home: &Path,
        private_tmp: &Path,
        system_tmp: &Path,
        network: bool,
    ) -> Result<ConfineSpec, String> {
        let (project, home) = (canon(project), canon(home));
        let (private_tmp, system_tmp) = (canon(private_tmp), canon(system_tmp));
        if home.starts_with(&project) || project.starts_with(&home) {
            return Err(format!(
                "the sandbox cannot protect $OPENMAX_HOME ({}) from agent processes in project {}: \
                 one contains the other; move $OPENMAX_HOME or open a different project",
                home.display(),
                project.display()
            ));
        }
        if home.starts_with(&private_tmp) {
            return Err(format!(
                "the sandbox cannot protect $OPENMAX_HOME ({}): it lies in the agent's temp \
                 directory {}",
                home.display(),
                private_tmp.display()
            ));
        }
        let mut tmp_at = vec![canon(Path::new("/tmp"))];
        if !tmp_at.contains(&system_tmp) {
            tmp_at.push(system_tmp);
        }
        let simulate = std::env::var(SIMULATE_ENV).ok();
        Ok(ConfineSpec {
            project,
            writable: Vec::new(),
            tmp: private_tmp,
            tmp_at,
            network,
            read_only: false,
            protected: super::protect::default_entries(),
            unix_sockets: Vec::new(),
            landlock: simulate.as_deref() != Some("no-landlock") && kernel_abi() > 0,
            simulate,
            lifeline: None,
        })
    }

    /// Also allow writes beneath `dir` (`[sandbox] writable` in the user config). Refused, naming
    /// the directory, when it is not absolute or when `home` lies inside it (or it inside `home`).
    pub fn allow_write(&mut self, dir: &str, home: &Path) -> Result<(), String> {
        let path = Path::new(dir);
        if !path.is_absolute() {
            return Err(format!(
                "[sandbox] writable: {dir:?} must be an absolute path"
            ));
        }
        let canon =
            std::fs::canonicalize(path).map_err(|e| format!("[sandbox] writable: {dir}: {e}"))?;
        let home = std::fs::canonicalize(home).unwrap_or_else(|_| home.to_path_buf());
        if home.starts_with(&canon) || canon.starts_with(&home) {
            return Err(format!(
                "[sandbox] writable: {dir} would let agent processes write $OPENMAX_HOME ({})",
                home.display()
            ));
        }
        if !self.writable.contains(&canon) {
            self.writable.push(canon);
        }
        Ok(())
    }

    /// Allow connecting to the Unix socket at `path` (`[sandbox] unix_sockets`): absolute.
    pub fn allow_socket(&mut self, path: &str) -> Result<(), String> {
        let p = Path::new(path);
        if !plain_absolute(p) {
            return Err(format!(
                "[sandbox] unix_sockets: {path:?} must be an absolute path without \"..\""
            ));
        }
        if !self.unix_sockets.iter().any(|s| s == p) {
            self.unix_sockets.push(p.to_path_buf());
        }
        Ok(())
    }

    /// The read-only sandbox of `readonly` mode: writes only to the private temp directory
    /// (and the devices), no sockets.
    pub fn read_only(&self) -> ConfineSpec {
        ConfineSpec {
            read_only: true,
            network: false,
            unix_sockets: Vec::new(),
            ..self.clone()
        }
    }

    /// What `TMPDIR` says inside: the system temp directory, which shows the private one;
    /// the private one itself where the user made the temp directories writable.
    pub fn tmpdir(&self) -> PathBuf {
        let shown = |t: &&PathBuf| {
            !t.starts_with(&self.project) && !self.writable.iter().any(|w| t.starts_with(w))
        };
        self.tmp_at
            .iter()
            .rev()
            .find(shown)
            .cloned()
            .unwrap_or_else(|| self.tmp.clone())
    }
}

/// The Landlock ABI version the running kernel offers, 0 when none.
pub fn kernel_abi() -> i32 {
    const LANDLOCK_CREATE_RULESET_VERSION: u32 = 1;
    // SAFETY: with a null attribute and size 0 this call only returns the ABI version.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    i32::try_from(v).unwrap_or(0).max(0)
}

/// Whether `p` is absolute and has only normal components (what the plan is made of).
pub fn plain_absolute(p: &Path) -> bool {
    p.is_absolute()
        && p.components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
}

#[cfg(test)]
impl ConfineSpec {
    /// A writable sandbox for `project` alone, its private temp directory `tmp`, no network,
    /// nothing protected: the spec tests start from and change what they test.
    pub(crate) fn plain(project: PathBuf, tmp: PathBuf) -> ConfineSpec {
        ConfineSpec {
            project,
            writable: Vec::new(),
            tmp,
            tmp_at: Vec::new(),
            network: false,
            read_only: false,
            protected: Vec::new(),
            unix_sockets: Vec::new(),
            landlock: true,
            simulate: None,
            lifeline: None,
        }
    }
}
