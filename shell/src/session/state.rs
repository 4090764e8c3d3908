//! User state outside the project: the state root ([`Home`], `$OPENMAX_HOME`) and the small
//! per-project state files ([`ProjectState`]: trust, saved approval mode, approved source hashes).
//!
//! Invariants:
//! - Nothing here writes into the project (it is agent-writable); everything lives under the
//!   state root, in `projects/<name>-<first 12 hex of sha256(canonical project path)>/`.
//! - [`ProjectState::open`] creates nothing; the directory appears on the first write.
//! - Every state file is replaced whole with [`write_atomic`] (temp file in the same directory,
//!   fsync, rename, fsync of the directory), so a reader sees the old file or the new one, never
//!   a torn one, and a crash after a successful save keeps the save.
//! - Read-modify-write of the approvals list happens under an exclusive OS lock
//!   (`approvals.lock`), so two processes approving at once both keep their approval.
//! - A missing or unreadable state file reads as "not set" (untrusted, no saved mode, nothing
//!   approved): the safe default.

use std::ffi::OsString;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use openmax_core::wire::Mode;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The user state root: `$OPENMAX_HOME`, else `$HOME/.openmax`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Home {
    root: PathBuf,
}

impl Home {
    /// The state root from the environment: `$OPENMAX_HOME` when set and non-empty, else
    /// `$HOME/.openmax`. A relative `$OPENMAX_HOME` is taken relative to the working directory.
    pub fn from_env() -> Result<Home, String> {
        Home::from_vars(std::env::var_os("OPENMAX_HOME"), std::env::var_os("HOME"))
    }

    /// A state root at `root` (tests, or a root chosen by the caller).
    pub fn new(root: PathBuf) -> Home {
        Home { root }
    }

    /// The state root directory (it may not exist yet).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `config.toml` under the state root.
    pub fn config_path(&self) -> PathBuf {
        self.root.join("config.toml")
    }

    /// [`Home::from_env`] with the variables given (testable without touching the process env).
    pub fn from_vars(
        openmax_home: Option<OsString>,
        home: Option<OsString>,
    ) -> Result<Home, String> {
        let root = match (
            openmax_home.filter(|v| !v.is_empty()),
            home.filter(|v| !v.is_empty()),
        ) {
            (Some(dir), _) => PathBuf::from(dir),
            (None, Some(home)) => PathBuf::from(home).join(".openmax"),
            (None, None) => {
                return Err(
                    "neither OPENMAX_HOME nor HOME is set: set OPENMAX_HOME to the directory \
                     where openmax keeps its state"
                        .to_string(),
                )
            }
        };
        let root = std::path::absolute(&root)
            .map_err(|e| format!("cannot resolve the state directory {}: {e}", root.display()))?;
        Ok(Home { root })
    }
}

/// How a file under the state root is named in messages: `~/.openmax/<rel>` when
/// `$OPENMAX_HOME` is unset (the default root), else the path under the directory it names.
/// Never the literal `$OPENMAX_HOME/...`, which tells a newcomer nothing they can open.
pub fn shown(rel: &str) -> String {
    shown_with(std::env::var_os("OPENMAX_HOME"), rel)
}

/// [`shown`] with `$OPENMAX_HOME`'s value given (testable without the process environment).
pub fn shown_with(openmax_home: Option<OsString>, rel: &str) -> String {
    match openmax_home.filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir).join(rel).display().to_string(),
        None => format!("~/.openmax/{rel}"),
    }
}

/// One project's state directory under the state root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectState {
    dir: PathBuf,
    project: PathBuf,
}

impl ProjectState {
    /// The state of `project` (canonicalized when it exists). Creates nothing.
    pub fn open(home: &Home, project: &Path) -> ProjectState {
        let project = fs::canonicalize(project).unwrap_or_else(|_| project.to_path_buf());
        let dir = home
            .root()
            .join("projects")
            .join(project_dir_name(&project));
        ProjectState { dir, project }
    }

    /// The state in directory `dir` (`projects/<name>-<hash12>/`) of a project whose path is
    /// not known here (listing every project's sessions).
    pub fn at(dir: PathBuf) -> ProjectState {
        ProjectState {
            dir,
            project: PathBuf::new(),
        }
    }

    /// The project's path, when this state was opened for it (not with [`ProjectState::at`]).
    pub fn known_project(&self) -> Option<&Path> {
        (!self.project.as_os_str().is_empty()).then_some(self.project.as_path())
    }

    /// `projects/<name>-<hash12>/` under the state root.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The canonical project path this state belongs to.
    pub fn project(&self) -> &Path {
        &self.project
    }

    /// `sessions/` inside [`ProjectState::dir`].
    pub fn sessions_dir(&self) -> PathBuf {
        self.dir.join("sessions")
    }

    /// The project's prompt history (the terminal UI's Up and Down), inside
    /// [`ProjectState::dir`].
    pub fn prompt_history(&self) -> PathBuf {
        self.dir.join("prompt-history.jsonl")
    }

    /// Whether `openmax --trust` marked this project trusted.
    pub fn trusted(&self) -> bool {
        read_json::<TrustFile>(&self.dir.join(TRUST_FILE))
            .map(|t| t.trusted)
            .unwrap_or(false)
    }

    /// Mark the project trusted (atomic write of `trust.json`).
    pub fn set_trusted(&self) -> io::Result<()> {
        let file = TrustFile {
            v: STATE_VERSION,
            trusted: true,
            project: self.project.to_string_lossy().into_owned(),
            at_ms: now_ms(),
        };
        self.write_state(TRUST_FILE, &file)
    }

    /// The approval mode saved for this project, if any (`mode.json`).
    pub fn mode(&self) -> Option<Mode> {
        read_json::<ModeFile>(&self.dir.join(MODE_FILE)).map(|m| m.mode)
    }

    /// Save the approval mode (atomic write of `mode.json`); in force for the next process.
    pub fn save_mode(&self, mode: Mode) -> io::Result<()> {
        let file = ModeFile {
            v: STATE_VERSION,
            mode,
            at_ms: now_ms(),
        };
        self.write_state(MODE_FILE, &file)
    }

    /// Whether a human approved exactly these bytes (full sha256 hex) of `source_path`.
    pub fn source_approved(&self, source_path: &str, full_sha256_hex: &str) -> bool {
        let sha = full_sha256_hex.to_ascii_lowercase();
        read_json::<ApprovalsFile>(&self.dir.join(APPROVALS_FILE))
            .map(|a| {
                a.approved
                    .iter()
                    .any(|e| e.source_path == source_path && e.sha256 == sha)
            })
            .unwrap_or(false)
    }

    /// Record a human's approval of exactly these bytes of `source_path` (atomic rewrite of
    /// `approvals.json` under the `approvals.lock` OS lock). Approving twice is a no-op.
    pub fn approve_source(&self, source_path: &str, full_sha256_hex: &str) -> io::Result<()> {
        let sha = full_sha256_hex.to_ascii_lowercase();
        if sha.len() != 64 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("not a full sha256 hex digest: {full_sha256_hex:?}"),
            ));
        }
        super::perms::private_dir_all(&self.dir)?;
        let lock = super::perms::private_file()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.dir.join(APPROVALS_LOCK))?;
        lock.lock()?;
        let path = self.dir.join(APPROVALS_FILE);
        let mut file = match fs::read(&path) {
            Ok(bytes) => serde_json::from_slice::<ApprovalsFile>(&bytes).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{} is corrupt: {e}", path.display()),
                )
            })?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => ApprovalsFile {
                v: STATE_VERSION,
                approved: Vec::new(),
            },
            Err(e) => return Err(e),
        };
        if !file
            .approved
            .iter()
            .any(|e| e.source_path == source_path && e.sha256 == sha)
        {
            file.approved.push(Approval {
                source_path: source_path.to_string(),
                sha256: sha,
                at_ms: now_ms(),
            });
            write_json_atomic(&path, &file)?;
        }
        drop(lock); // releases the OS lock
        Ok(())
    }

    fn write_state<T: Serialize>(&self, name: &str, value: &T) -> io::Result<()> {
        super::perms::private_dir_all(&self.dir)?;
        write_json_atomic(&self.dir.join(name), value)
    }
}

/// Replace `path` with `bytes` atomically: write a temp file in the same directory, fsync it,
/// rename it over `path`, fsync the directory. On error the temp file is removed (best effort)
/// and `path` is unchanged.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("not a file path: {}", path.display()),
        )
    })?;
    let mut tmp_name = OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(
        ".tmp.{}.{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let tmp = dir.join(tmp_name);
    let result = (|| {
        let mut f = super::perms::private_file()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        fs::rename(&tmp, path)?;
        sync_dir(dir)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// fsync a directory so a rename or a file creation in it survives a crash.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// `write_atomic` of a value as pretty JSON with a trailing newline.
pub(crate) fn write_json_atomic<T: Serialize>(path: &Path, value: &T) -> io::Result<()> {
    let mut bytes = serde_json::to_vec_pretty(value)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    bytes.push(b'\n');
    write_atomic(path, &bytes)
}

const STATE_VERSION: u32 = 1;
const TRUST_FILE: &str = "trust.json";
const MODE_FILE: &str = "mode.json";
const APPROVALS_FILE: &str = "approvals.json";
const APPROVALS_LOCK: &str = "approvals.lock";

#[derive(Serialize, Deserialize)]
struct TrustFile {
    v: u32,
    trusted: bool,
    project: String,
    at_ms: u64,
}

#[derive(Serialize, Deserialize)]
struct ModeFile {
    v: u32,
    mode: Mode,
    at_ms: u64,
}

#[derive(Serialize, Deserialize)]
struct ApprovalsFile {
    v: u32,
    approved: Vec<Approval>,
}

#[derive(Serialize, Deserialize)]
struct Approval {
    source_path: String,
    /// Full sha256 of the approved bytes, lowercase hex.
    sha256: String,
    at_ms: u64,
}

/// A state file's contents, or `None` when it is missing, unreadable or of another version.
fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Option<T> {
    let bytes = fs::read(path).ok()?;
    let value: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    if value.get("v").and_then(|v| v.as_u64()) != Some(u64::from(STATE_VERSION)) {
        return None;
    }
    serde_json::from_value(value).ok()
}

/// `<name>-<first 12 hex of sha256(path bytes)>`, the name sanitized to `[A-Za-z0-9._-]`.
fn project_dir_name(project: &Path) -> String {
    let mut name: String = project
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if name.is_empty() || name.starts_with('.') {
        name.insert(0, 'p');
    }
    let digest = Sha256::digest(path_bytes(project));
    let hex: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    format!("{name}-{hex}")
}

#[cfg(unix)]
fn path_bytes(p: &Path) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    p.as_os_str().as_bytes().to_vec()
}

#[cfg(not(unix))]
fn path_bytes(p: &Path) -> Vec<u8> {
    p.to_string_lossy().into_owned().into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dir_name_is_name_and_hash_of_path() {
        let n = project_dir_name(Path::new("/home/u/my proj"));
        let digest = Sha256::digest(b"/home/u/my proj");
        let hex: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
        assert_eq!(n, format!("my_proj-{hex}"));
        assert!(project_dir_name(Path::new("/")).starts_with("p-"));
        assert!(project_dir_name(Path::new("/x/.hidden")).starts_with("p.hidden-"));
    }

    #[test]
    fn home_from_vars() {
        assert_eq!(
            Home::from_vars(Some("/a/b".into()), Some("/h".into()))
                .unwrap()
                .root(),
            Path::new("/a/b")
        );
        assert_eq!(
            Home::from_vars(Some("".into()), Some("/h".into()))
                .unwrap()
                .root(),
            Path::new("/h/.openmax")
        );
        let err = Home::from_vars(None, None).unwrap_err();
        assert!(err.contains("OPENMAX_HOME"), "{err}");
    }

    #[test]
    fn state_paths_are_shown_as_a_newcomer_can_open_them() {
        assert_eq!(shown_with(None, "config.toml"), "~/.openmax/config.toml");
        assert_eq!(
            shown_with(Some("".into()), "AGENTS.md"),
            "~/.openmax/AGENTS.md"
        );
        assert_eq!(
            shown_with(Some("/srv/omx".into()), "config.toml"),
            "/srv/omx/config.toml"
        );
    }

    /// Only a missing approvals file is an empty one: one that cannot be read is an error and
    /// is left as it is, never replaced by a list holding only the new approval.
    #[test]
    fn an_approvals_file_that_cannot_be_read_is_an_error_and_is_kept() {
        let dir = crate::scratch::path("approvals");
        let _ = std::fs::remove_dir_all(&dir);
        let state = ProjectState::at(dir.clone());
        let sha = "ab".repeat(32);
        state
            .approve_source("a.toml", &sha)
            .expect("a missing file is empty");
        let written = std::fs::read(dir.join(APPROVALS_FILE)).expect("written");
        std::fs::remove_file(dir.join(APPROVALS_FILE)).unwrap();
        // A link to itself: reading it fails with ELOOP, whoever runs the test.
        std::os::unix::fs::symlink(APPROVALS_FILE, dir.join(APPROVALS_FILE)).unwrap();
        let err = state.approve_source("b.toml", &sha).unwrap_err();
        assert_ne!(err.kind(), io::ErrorKind::NotFound, "{err}");
        let kept = std::fs::symlink_metadata(dir.join(APPROVALS_FILE)).unwrap();
        assert!(kept.file_type().is_symlink());
        assert!(!written.is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
