//! The kernel sandbox of an agent process: Landlock for the file system (and TCP), seccomp-bpf
//! for sockets. Prepared in openmax before the fork ([`Confinement::prepare`]), applied in the
//! child between fork and exec ([`Confinement::install`]), so it covers the process and
//! everything it starts: grandchildren, `setsid`'d daemons, an `openmax` it runs.
//!
//! Invariants:
//! - Reads and execution are allowed everywhere; writes (creating, removing, renaming, linking,
//!   truncating, writing a file) only beneath [`ConfineSpec::writable`] (the project root and
//!   the temp directories) and to a few character devices (`/dev/null`, `/dev/tty`, …). A
//!   rename or a hard link across that boundary is refused (`EXDEV`/`EACCES`).
//! - `$OPENMAX_HOME` is never writable: [`ConfineSpec::new`] refuses a layout where a writable
//!   root contains it (or it contains the project), and leaves out the system temp directory
//!   when `$OPENMAX_HOME` lies inside it.
//! - `ioctl(TIOCSTI)` fails with `EACCES` (a process cannot type into the user's terminal).
//! - With `network` off, `socket(2)` for IPv4, IPv6 and packet sockets fails with `EACCES`
//!   (seccomp), TCP bind and connect are refused by Landlock where the kernel offers it (ABI 4),
//!   and `io_uring_setup` is refused (io_uring can open sockets without `socket(2)`). Unix
//!   sockets stay available.
//! - Where the kernel offers Landlock (ABI 6 and later) the process also cannot signal
//!   processes outside its sandbox (openmax itself included) nor connect to abstract Unix
//!   sockets created outside it.
//! - Fail closed: when the kernel offers no Landlock at all, [`Confinement::prepare`] is an
//!   error with [`UNAVAILABLE`]; a newer feature missing on an older kernel is used best-effort
//!   (the ABI is negotiated) and [`Confinement::abi`] says which was obtained.
//! - The read-only variant ([`ConfineSpec::read_only`], for `readonly` mode) allows writes only
//!   to the session's private temp directory and those devices, refuses every `socket(2)` (Unix
//!   sockets too: a socket can ask another process to change things) and the system calls that
//!   change files without writing them (`chmod`, `chown`, `utimensat`, extended attributes) and
//!   create IPC objects or keys. It is offered only where the kernel offers Landlock ABI
//!   [`READ_ONLY_MIN_ABI`] (truncation and the signal scope), see [`Confine::read_only`].
//! - Only async-signal-safe work runs in the child: the ruleset is built and its file
//!   descriptors opened in the parent; the child makes three system calls (`prctl`,
//!   `landlock_restrict_self`, `seccomp`).

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use landlock::{
    Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, Scope, ABI,
};
use openmax_core::tool::RunSandbox;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// The newest Landlock ABI openmax asks for (the kernel may grant less).
pub const WANTED_ABI: ABI = ABI::V7;

/// The oldest Landlock ABI the read-only sandbox is offered on: ABI 3 refuses `truncate(2)`,
/// ABI 6 keeps signals inside the sandbox (a read-only command must not kill the user's other
/// processes). On older kernels `readonly` mode refuses the shell, as it does without Landlock.
pub const READ_ONLY_MIN_ABI: i32 = 6;

/// The start of the message when the kernel offers no Landlock.
pub const UNAVAILABLE: &str = "the sandbox is unavailable";

/// Set to `no-landlock` to make openmax behave as on a kernel without Landlock (the ABI is
/// pinned to "unsupported", the path the `landlock` crate takes on such kernels). It can only
/// make openmax stricter: agent processes are then refused unless the user config says
/// `[sandbox] mode = "off"`. For testing the fail-closed path. `abi-N` makes openmax reckon
/// with a kernel offering Landlock ABI N where it decides what to offer (the read-only
/// sandbox); the ruleset still asks for [`WANTED_ABI`].
pub const SIMULATE_ENV: &str = "OPENMAX_SANDBOX_SIMULATE";

/// Character devices an agent process may write (they reach no file).
const WRITABLE_DEVICES: [&str; 6] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
];

/// What an agent process may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfineSpec {
    /// Directories beneath which every write is allowed (canonical paths).
    pub writable: Vec<PathBuf>,
    /// Whether network sockets are allowed (`[sandbox] network = true`).
    pub network: bool,
    /// The Landlock ABI to ask for ([`WANTED_ABI`], or unsupported when simulated).
    pub abi: ABI,
    /// Read-only: every socket, metadata change, IPC object and key refused too (seccomp).
    pub read_only: bool,
}

impl ConfineSpec {
    /// Writes allowed under `project`, `private_tmp` (a directory of this session's own) and
    /// the system temp directory `system_tmp` unless it holds `home`. Refuses a layout the
    /// sandbox cannot protect `home` in (`home` inside the project or a private temp directory,
    /// or the project inside `home`). [`ConfineSpec::allow_write`] adds the user's directories.
    pub fn new(
        project: &Path,
        home: &Path,
        private_tmp: &Path,
        system_tmp: &Path,
        network: bool,
    ) -> Result<ConfineSpec, String> {
        let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
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
        let mut writable = vec![project, private_tmp];
        if !home.starts_with(&system_tmp) && !writable.contains(&system_tmp) {
            writable.push(system_tmp);
        }
        if let Ok(shm) = std::fs::canonicalize("/dev/shm") {
            if !home.starts_with(&shm) {
                writable.push(shm);
            }
        }
        Ok(ConfineSpec {
            writable,
            network,
            abi: abi_from_env(),
            read_only: false,
        })
    }

    /// The read-only sandbox of `readonly` mode: writes only beneath `private_tmp` (and to the
    /// devices every agent process may write), no network, no sockets at all.
    pub fn read_only(&self, private_tmp: &Path) -> ConfineSpec {
        let tmp = std::fs::canonicalize(private_tmp).unwrap_or_else(|_| private_tmp.to_path_buf());
        ConfineSpec {
            writable: vec![tmp],
            network: false,
            abi: self.abi,
            read_only: true,
        }
    }
}

impl ConfineSpec {
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
}

/// The Landlock ABI the kernel offers as openmax reckons with it: [`kernel_abi`], lowered to N
/// when [`SIMULATE_ENV`] says `abi-N`, 0 when it says `no-landlock`.
pub fn offered_abi() -> i32 {
    let kernel = kernel_abi();
    match std::env::var(SIMULATE_ENV).as_deref() {
        Ok("no-landlock") => 0,
        Ok(v) => match v.strip_prefix("abi-").and_then(|n| n.parse::<i32>().ok()) {
            Some(n) => kernel.min(n.max(0)),
            None => kernel,
        },
        Err(_) => kernel,
    }
}

/// [`WANTED_ABI`], or unsupported when [`SIMULATE_ENV`] says `no-landlock`.
pub fn abi_from_env() -> ABI {
    match std::env::var(SIMULATE_ENV).as_deref() {
        Ok("no-landlock") => ABI::Unsupported,
        _ => WANTED_ABI,
    }
}

/// A sandbox ready to be installed into commands (cheap to clone: the descriptors are shared).
#[derive(Debug, Clone)]
pub struct Confinement {
    inner: Arc<Prepared>,
}

#[derive(Debug)]
struct Prepared {
    /// The Landlock ruleset, built and populated in the parent.
    ruleset: OwnedFd,
    /// The seccomp program.
    seccomp: Option<BpfProgram>,
    abi: i32,
    /// The session's private temp directory (`TMPDIR` of agent processes), removed on drop.
    tmp: Option<PathBuf>,
}

impl Drop for Prepared {
    fn drop(&mut self) {
        if let Some(t) = &self.tmp {
            let _ = std::fs::remove_dir_all(t);
        }
    }
}

impl Confinement {
    /// Build the Landlock ruleset and the seccomp program for `spec`. An error names what is
    /// missing; it starts with [`UNAVAILABLE`] when the kernel offers no Landlock.
    pub fn prepare(spec: &ConfineSpec) -> Result<Confinement, String> {
        let unavailable = || {
            format!(
                "{UNAVAILABLE}: this kernel offers no Landlock, so agent processes cannot be kept \
                 out of $OPENMAX_HOME and outside the project; openmax refuses to run them \
                 unconfined (a human can set [sandbox] mode = \"off\" in \
                 $OPENMAX_HOME/config.toml to run them without the sandbox)"
            )
        };
        // Simulated (or a build without any known ABI): the same refusal a kernel without
        // Landlock gets below.
        if spec.abi == ABI::Unsupported {
            return Err(unavailable());
        }
        let abi = spec.abi;
        let err = |e: &dyn std::fmt::Display| format!("cannot prepare the sandbox: {e}");
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(AccessFs::from_all(abi))
            .map_err(|e| err(&e))?;
        if !spec.network {
            ruleset = ruleset
                .handle_access(AccessNet::from_all(abi))
                .map_err(|e| err(&e))?;
        }
        ruleset = ruleset.scope(Scope::from_all(abi)).map_err(|e| err(&e))?;
        let mut created = ruleset.create().map_err(|e| err(&e))?;
        created = created
            .add_rule(PathBeneath::new(
                PathFd::new("/").map_err(|e| err(&e))?,
                AccessFs::from_read(abi),
            ))
            .map_err(|e| err(&e))?;
        for dir in &spec.writable {
            let fd = PathFd::new(dir).map_err(|e| err(&format!("{}: {e}", dir.display())))?;
            created = created
                .add_rule(PathBeneath::new(fd, AccessFs::from_all(abi)))
                .map_err(|e| err(&e))?;
        }
        for dev in WRITABLE_DEVICES {
            // A device missing here (no /dev/tty in a container) is simply not granted.
            let Ok(fd) = PathFd::new(dev) else { continue };
            let access = if Path::new(dev).is_dir() {
                AccessFs::from_all(abi)
            } else {
                AccessFs::from_file(abi)
            };
            created = created
                .add_rule(PathBeneath::new(fd, access))
                .map_err(|e| err(&e))?;
        }
        let fd: Option<OwnedFd> = created.into();
        let Some(ruleset) = fd else {
            return Err(unavailable());
        };
        let seccomp = Some(syscall_filter(spec.network, spec.read_only).map_err(|e| err(&e))?);
        Ok(Confinement {
            inner: Arc::new(Prepared {
                ruleset,
                seccomp,
                abi: kernel_abi(),
                tmp: None,
            }),
        })
    }

    /// The Landlock ABI the kernel offers (0: none).
    pub fn abi(&self) -> i32 {
        self.inner.abi
    }

    /// Whether both are the same prepared sandbox.
    pub fn same(&self, other: &Confinement) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Apply the sandbox in `cmd`'s child between fork and exec. A failure there fails the
    /// spawn (the process never runs unconfined).
    pub fn install(&self, cmd: &mut std::process::Command) {
        let inner = Arc::clone(&self.inner);
        // SAFETY: the closure runs in the forked child; it only makes system calls (prctl,
        // landlock_restrict_self, seccomp) on data prepared before the fork, and allocates
        // nothing.
        unsafe {
            cmd.pre_exec(move || inner.apply());
        }
    }
}

impl Prepared {
    /// In the child: no new privileges, the Landlock domain, then the seccomp filter.
    fn apply(&self) -> std::io::Result<()> {
        // SAFETY: plain system calls with integer arguments; the ruleset fd is open (owned by
        // `self`, inherited across the fork).
        unsafe {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::syscall(
                libc::SYS_landlock_restrict_self,
                self.ruleset.as_raw_fd(),
                0u32,
            ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
        }
        if let Some(prog) = &self.seccomp {
            seccompiler::apply_filter(prog)
                .map_err(|_| std::io::Error::from_raw_os_error(libc::EPERM))?;
        }
        Ok(())
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

/// seccomp: `ioctl(TIOCSTI)` (pushing input into a terminal, which the user's shell would run
/// after openmax exits) always fails with `EACCES`; with the network off, so do `socket(2)` for
/// IPv4, IPv6 and packet sockets, and `io_uring_setup`; read-only, so do every `socket(2)` and
/// [`READ_ONLY_REFUSED`]. Everything else is allowed.
fn syscall_filter(network: bool, read_only: bool) -> Result<BpfProgram, seccompiler::BackendError> {
    let arch = if cfg!(target_arch = "aarch64") {
        TargetArch::aarch64
    } else if cfg!(target_arch = "riscv64") {
        TargetArch::riscv64
    } else {
        TargetArch::x86_64
    };
    // Argument `index` equal to `value`; compared on the low 32 bits, which is what the kernel
    // reads for a socket family and an ioctl request.
    let arg_is = |index: u8, value: u64| {
        SeccompRule::new(vec![SeccompCondition::new(
            index,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Eq,
            value,
        )?])
    };
    let mut rules = std::collections::BTreeMap::new();
    rules.insert(libc::SYS_ioctl, vec![arg_is(1, libc::TIOCSTI)?]);
    if read_only {
        // An empty rule list matches every call.
        rules.insert(libc::SYS_socket, Vec::new());
        rules.insert(libc::SYS_io_uring_setup, Vec::new());
        for nr in READ_ONLY_REFUSED {
            rules.insert(*nr, Vec::new());
        }
    } else if !network {
        let families = [libc::AF_INET, libc::AF_INET6, libc::AF_PACKET];
        let socket_rules = families
            .iter()
            .map(|&f| arg_is(0, f as u64))
            .collect::<Result<Vec<_>, _>>()?;
        rules.insert(libc::SYS_socket, socket_rules);
        rules.insert(libc::SYS_io_uring_setup, Vec::new());
    }
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EACCES as u32),
        arch,
    )?;
    BpfProgram::try_from(filter)
}

/// What the read-only sandbox refuses besides sockets: the system calls that change a file
/// without writing it (Landlock does not judge mode, owner, times or extended attributes), and
/// those that create IPC objects or keys other processes of the user would see.
const READ_ONLY_REFUSED: &[libc::c_long] = &[
    libc::SYS_fchmod,
    libc::SYS_fchmodat,
    libc::SYS_fchmodat2,
    libc::SYS_fchown,
    libc::SYS_fchownat,
    libc::SYS_utimensat,
    libc::SYS_setxattr,
    libc::SYS_lsetxattr,
    libc::SYS_fsetxattr,
    libc::SYS_removexattr,
    libc::SYS_lremovexattr,
    libc::SYS_fremovexattr,
    // setxattrat and removexattrat (Linux 6.13; one number on every architecture).
    463,
    466,
    libc::SYS_msgget,
    libc::SYS_semget,
    libc::SYS_shmget,
    libc::SYS_mq_open,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_keyctl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_chmod,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_chown,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_lchown,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_utime,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_utimes,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_futimesat,
];

/// The kernel sandbox of a session's agent processes, decided once at start-up.
#[derive(Debug, Clone, Default)]
pub enum Confine {
    /// No kernel sandbox: `[sandbox] mode = "off"` in the user config, or a tool context built
    /// outside a session (library use and unit tests).
    #[default]
    Off,
    /// Every agent process is confined; `tmp` is its `TMPDIR`. `read_only` is the read-only
    /// sandbox of `readonly` mode, where the kernel offers it.
    On {
        sandbox: Confinement,
        tmp: PathBuf,
        read_only: Option<Confinement>,
    },
    /// The sandbox cannot be had: every agent process is refused with this message.
    Unavailable(String),
}

impl PartialEq for Confine {
    fn eq(&self, other: &Confine) -> bool {
        match (self, other) {
            (Confine::Off, Confine::Off) => true,
            (Confine::On { sandbox: a, .. }, Confine::On { sandbox: b, .. }) => a.same(b),
            (Confine::Unavailable(a), Confine::Unavailable(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for Confine {}

impl Confine {
    /// The sandbox for a session in `project` with state under `home`, from `[sandbox] mode`
    /// (`"on"`, the default, or `"off"`), `network` and `writable` (more directories). An unknown
    /// mode or a bad `writable` entry is an error (a start-up failure); a sandbox the kernel or
    /// the layout cannot give is [`Confine::Unavailable`].
    pub fn for_session(
        mode: Option<&str>,
        network: bool,
        writable: &[String],
        project: &Path,
        home: &Path,
    ) -> Result<Confine, String> {
        match mode {
            Some("off") => return Ok(Confine::Off),
            None | Some("on") => {}
            Some(other) => {
                return Err(format!(
                    "[sandbox] mode must be \"on\" or \"off\", got {other:?}"
                ))
            }
        }
        let system_tmp = std::env::temp_dir();
        let tmp = match private_tmp(&system_tmp) {
            Ok(t) => t,
            Err(e) => {
                return Ok(Confine::Unavailable(format!(
                    "cannot create the agent's temp directory under {}: {e}",
                    system_tmp.display()
                )))
            }
        };
        let mut spec = match ConfineSpec::new(project, home, &tmp, &system_tmp, network) {
            Ok(spec) => spec,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&tmp);
                return Ok(Confine::Unavailable(e));
            }
        };
        // The user's own configuration: a bad entry is a start-up error naming it.
        for dir in writable {
            if let Err(e) = spec.allow_write(dir, home) {
                let _ = std::fs::remove_dir_all(&tmp);
                return Err(e);
            }
        }
        let prepared = Confinement::prepare(&spec);
        match prepared {
            Ok(mut sandbox) => {
                if let Some(inner) = Arc::get_mut(&mut sandbox.inner) {
                    inner.tmp = Some(tmp.clone());
                }
                // Without it `readonly` mode refuses the shell, as it always did.
                let read_only = (offered_abi() >= READ_ONLY_MIN_ABI)
                    .then(|| Confinement::prepare(&spec.read_only(&tmp)).ok())
                    .flatten();
                Ok(Confine::On {
                    sandbox,
                    tmp,
                    read_only,
                })
            }
            Err(e) => {
                let _ = std::fs::remove_dir_all(&tmp);
                Ok(Confine::Unavailable(e))
            }
        }
    }

    /// Confine `cmd` (and point its `TMPDIR` at the private temp directory); an error when the
    /// sandbox is unavailable, in which case nothing may be started.
    pub fn apply(&self, cmd: &mut std::process::Command) -> Result<(), String> {
        self.apply_as(cmd, RunSandbox::Session)
    }

    /// Whether [`RunSandbox::ReadOnly`] can be had.
    pub fn read_only_available(&self) -> bool {
        matches!(
            self,
            Confine::On {
                read_only: Some(_),
                ..
            }
        )
    }

    /// Confine `cmd` as the core decided for its call: the session's sandbox, the read-only
    /// one (an error when there is none), or none at all (a human approved running it
    /// outside; `TMPDIR` is then left as openmax's environment has it).
    pub fn apply_as(&self, cmd: &mut std::process::Command, how: RunSandbox) -> Result<(), String> {
        match (self, how) {
            (_, RunSandbox::Unsandboxed) | (Confine::Off, RunSandbox::Session) => Ok(()),
            (Confine::On { sandbox, tmp, .. }, RunSandbox::Session) => {
                cmd.env("TMPDIR", tmp);
                sandbox.install(cmd);
                Ok(())
            }
            (
                Confine::On {
                    read_only: Some(ro),
                    tmp,
                    ..
                },
                RunSandbox::ReadOnly,
            ) => {
                cmd.env("TMPDIR", tmp);
                ro.install(cmd);
                Ok(())
            }
            (Confine::Off | Confine::On { .. }, RunSandbox::ReadOnly) => Err(format!(
                "the read-only sandbox is unavailable (it needs the kernel sandbox on and \
                 Landlock ABI {READ_ONLY_MIN_ABI} or later, this kernel offers {})",
                offered_abi()
            )),
            (Confine::Unavailable(why), RunSandbox::Session | RunSandbox::ReadOnly) => {
                Err(why.clone())
            }
        }
    }
}

/// A fresh directory only this user can enter, under `system_tmp`.
fn private_tmp(system_tmp: &Path) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = system_tmp.join(format!(
        "openmax-agent-{}-{nanos:08x}-{n}",
        std::process::id()
    ));
    std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
    Ok(dir)
}

#[cfg(test)]
mod tests;
