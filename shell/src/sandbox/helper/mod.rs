//! The sandbox helper: the process openmax starts in place of an agent's command. It is
//! openmax itself, re-executed as `openmax --sandbox-exec SPEC -- PROGRAM ARGS…` ([`FLAG`];
//! SPEC is a [`ConfineSpec`] as JSON). It stays outside the sandbox and
//! 1. clones the sandbox's first process ([`init`]) into new mount, pid and IPC namespaces, a
//!    new network namespace when the network is off, and a new user namespace unless it runs
//!    as root with `CAP_SYS_ADMIN`. That process builds the view ([`view`]), drops every
//!    privilege ([`privileges`]), installs Landlock and seccomp ([`filter`]), and runs PROGRAM
//!    as its child;
//! 2. answers the sandbox's `connect(2)` calls, which seccomp hands to it ([`supervisor`],
//!    deciding with [`sockets`]), and removes what the command may not create in a git
//!    directory ([`guard`]);
//! 3. ends as PROGRAM ended: with its exit status, or killed by the same signal.
//!
//! Invariants:
//! - PROGRAM never runs unless every layer is in force: a failure before its exec is reported
//!   on stderr as `openmax: the sandbox is unavailable: …` with exit status [`SETUP_FAILED`].
//! - When the helper dies (its process group is killed at the end of a call), the sandbox's
//!   first process gets SIGKILL (its parent-death signal), and with it every process of the
//!   sandbox's pid namespace: nothing the command started outlives it.
//! - `--probe` in place of `-- PROGRAM` builds everything, runs nothing, and prints what is in
//!   force as one JSON line ([`Report`]): `openmax sandbox check`, and the check a session makes
//!   before its first agent process.
//! - When openmax dies (even by SIGKILL) the helper kills the sandbox's first process, so the
//!   sandbox never outlives the openmax that started it ([`super::lifeline`]).
//! - The helper is single-threaded until the sandbox's first process is cloned (the clone then
//!   behaves as a fork and the child may use the allocator); its threads afterwards answer
//!   `connect(2)` calls, and one waits for openmax to be gone.

pub mod diag;
pub mod filter;
pub mod guard;
pub mod init;
pub mod privileges;
pub mod sockets;
pub mod supervisor;
pub mod view;

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};

use rustix::net::{AddressFamily, SocketFlags, SocketType};
use serde::{Deserialize, Serialize};

use super::spec::{ConfineSpec, OPT_OUT, UNAVAILABLE};

/// The first argument that makes `openmax` the sandbox helper.
pub const FLAG: &str = "--sandbox-exec";

/// The exit status of a helper that could not build the sandbox (nothing ran).
pub const SETUP_FAILED: i32 = 125;

/// What the sandbox's first process reports when asked to `--probe`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// The user id agent processes run as.
    pub uid: u32,
    /// The Landlock ABI the kernel enforces.
    pub landlock_abi: i32,
    /// A user namespace was made (openmax does not run as root with `CAP_SYS_ADMIN`).
    pub user_namespace: bool,
    /// The network is off: a network namespace of its own (only a loopback, down).
    pub network_namespace: bool,
    /// The capability sets read back inside (`CapEff`, `CapPrm`, `CapInh`, `CapBnd`,
    /// `CapAmb`): all zero.
    pub capabilities: String,
    /// `no_new_privs` is set.
    pub no_new_privs: bool,
    /// The seccomp mode read back inside (2: filtering).
    pub seccomp: u32,
    /// `connect(2)` is answered by the helper.
    pub connect_broker: bool,
    /// What the view holds read-only in the project.
    pub held: Vec<String>,
    /// Where the session's private temp directory is shown.
    pub tmp_at: Vec<String>,
    /// What the sandbox's `/dev` holds.
    pub dev: Vec<String>,
}

/// A failure to build the sandbox: which layer, and the kernel's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure(pub String);

impl Failure {
    /// `what` failed with `err`.
    pub fn io(what: &str, err: impl std::fmt::Display) -> Failure {
        Failure(format!("{what}: {err}"))
    }
}

/// Run the helper when this process was started as one; return otherwise. Called first thing
/// in `main`, before anything else runs.
pub fn dispatch() {
    let mut args = std::env::args_os();
    let _ = args.next();
    if args.next().as_deref() != Some(std::ffi::OsStr::new(FLAG)) {
        return;
    }
    // Named as a session is (`crate::human`): every process inside has an openmax ancestor.
    crate::human::mark_session();
    let code = run(args.collect());
    std::process::exit(code);
}

/// What to run in the sandbox: PROGRAM and its arguments, or nothing (`--probe`).
pub type Launch = Option<(OsString, Vec<OsString>)>;

fn parse(args: Vec<OsString>) -> Result<(ConfineSpec, Launch), String> {
    let mut it = args.into_iter();
    let spec = it
        .next()
        .ok_or("the sandbox specification is missing")?
        .into_string()
        .map_err(|_| "the sandbox specification is not UTF-8")?;
    let spec: ConfineSpec =
        serde_json::from_str(&spec).map_err(|e| format!("bad sandbox specification: {e}"))?;
    match it.next().as_deref().and_then(|a| a.to_str()) {
        Some("--probe") => Ok((spec, None)),
        Some("--") => {
            let program = it.next().ok_or("no program to run")?;
            Ok((spec, Some((program, it.collect()))))
        }
        _ => Err("expected `--probe` or `-- PROGRAM ARGS…` after the specification".into()),
    }
}

fn run(args: Vec<OsString>) -> i32 {
    let (spec, launch) = match parse(args) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("openmax: {UNAVAILABLE}: {e}");
            return SETUP_FAILED;
        }
    };
    match start(&spec, launch) {
        Ok(code) => code,
        Err(Failure(why)) => {
            let why = why
                .trim_start_matches(&format!("{UNAVAILABLE}: "))
                .to_string();
            if why.contains("[sandbox] mode") {
                eprintln!("openmax: {UNAVAILABLE}: {why}");
            } else {
                eprintln!("openmax: {UNAVAILABLE}: {why}; {OPT_OUT}");
            }
            SETUP_FAILED
        }
    }
}

/// The sandbox's first process, for the signal forwarder.
static INIT_PID: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward_to_init(sig: libc::c_int) {
    let pid = INIT_PID.load(Ordering::Relaxed);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe.
        unsafe {
            libc::kill(pid, sig);
        }
    }
}

/// The signals a helper (and the sandbox's first process) passes on to its child.
pub const FORWARDED: [libc::c_int; 6] = [
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

/// Install `handler` for every [`FORWARDED`] signal.
pub fn forward_signals(handler: extern "C" fn(libc::c_int)) {
    for sig in FORWARDED {
        // SAFETY: a zeroed sigaction with a plain handler and SA_RESTART is valid.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = handler as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// Whether this process can build the sandbox without a user namespace: root with
/// `CAP_SYS_ADMIN` in effect.
pub fn privileged() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    root && rustix::thread::capabilities(None)
        .map(|c| {
            c.effective
                .contains(rustix::thread::CapabilitySet::SYS_ADMIN)
        })
        .unwrap_or(false)
}

/// The namespaces the sandbox's first process is cloned into.
fn clone_flags(spec: &ConfineSpec, user_ns: bool) -> libc::c_int {
    let mut flags = libc::CLONE_NEWNS | libc::CLONE_NEWPID | libc::CLONE_NEWIPC;
    if !spec.network {
        flags |= libc::CLONE_NEWNET;
    }
    if user_ns {
        flags |= libc::CLONE_NEWUSER;
    }
    flags
}

/// Why namespaces could not be made, with what a human can do.
fn namespace_failure(err: io::Error, user_ns: bool) -> Failure {
    let how = if user_ns {
        "unprivileged user namespaces are off on this machine (enable them: sysctl \
         kernel.apparmor_restrict_unprivileged_userns=0 on Ubuntu 23.10 and later, or an \
         AppArmor profile for openmax allowing userns; sysctl kernel.unprivileged_userns_clone=1 \
         on older Debian; user.max_user_namespaces > 0; inside a container, allow unshare and \
         clone in its seccomp profile)"
    } else {
        "this process may not create namespaces (inside a container, allow unshare and clone \
         in its seccomp profile, or run it with CAP_SYS_ADMIN)"
    };
    Failure(format!(
        "cannot create the sandbox's namespaces ({err}): {how}, so agent processes cannot be \
         given their own view of the file system, processes and sockets; {OPT_OUT}"
    ))
}

/// Clone the sandbox's first process. Returns its pid (0 in the child).
fn clone_init(flags: libc::c_int) -> io::Result<libc::pid_t> {
    // SAFETY: the helper has started no thread, so the child may use the allocator and std as
    // after fork(2); a null stack makes clone(2) run the child on a copy of this stack.
    let r = unsafe {
        libc::syscall(
            libc::SYS_clone,
            (flags | libc::SIGCHLD) as libc::c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r as libc::pid_t)
}

/// The user and group ids the helper runs as (mapped to themselves in a user namespace).
#[derive(Debug, Clone, Copy)]
pub struct Ids {
    pub uid: u32,
    pub gid: u32,
}

fn start(spec: &ConfineSpec, launch: Launch) -> Result<i32, Failure> {
    if !spec.landlock {
        return Err(Failure(super::spec::no_landlock()));
    }
    let cwd = std::env::current_dir().map_err(|e| Failure::io("the working directory", e))?;
    // SAFETY: getuid and getgid have no preconditions.
    let ids = unsafe {
        Ids {
            uid: libc::getuid(),
            gid: libc::getgid(),
        }
    };
    let user_ns = !privileged();
    if spec.simulate.as_deref() == Some("no-namespaces") {
        return Err(namespace_failure(
            io::Error::from_raw_os_error(libc::EPERM),
            user_ns,
        ));
    }
    let plan = view::Plan::new(spec)?;
    // Watches set now, before any process of the sandbox exists.
    let guard = if launch.is_some() {
        guard::Guard::new(&plan.absent)
    } else {
        None
    };
    let (ours, theirs) = rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )
    .map_err(|e| Failure::io("a channel to the sandbox", e))?;
    let probe = launch.is_none();
    let lifeline = spec.lifeline.and_then(super::lifeline::take);
    let pid = clone_init(clone_flags(spec, user_ns)).map_err(|e| namespace_failure(e, user_ns))?;
    if pid == 0 {
        drop(ours);
        drop(lifeline);
        init::run(spec, &plan, launch, &cwd, theirs, ids, user_ns);
    }
    drop(theirs);
    if let Some(read) = lifeline {
        super::lifeline::watch(read, pid);
    }
    let guard = guard.map(guard::Guard::spawn);
    INIT_PID.store(pid, Ordering::Relaxed);
    forward_signals(forward_to_init);
    // Outside the sandbox, as root, the helper keeps only what answering `connect(2)` needs.
    privileges::keep_only_ptrace();
    let result = serve(spec, pid, &ours, probe);
    if result.is_err() {
        // SAFETY: plain kill of our own child.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
    let status = reap(pid);
    if let Some(g) = &guard {
        g.sweep();
    }
    match result? {
        Served::Probe(report) => {
            println!("{report}");
            Ok(0)
        }
        Served::Ended(raw) => Ok(relay(raw)),
        Served::InitDied => Ok(relay(status)),
    }
}

/// How the sandbox ended, as the helper saw it.
enum Served {
    /// The probe's report (JSON).
    Probe(String),
    /// PROGRAM's raw wait status.
    Ended(i32),
    /// The first process died without saying how PROGRAM ended (killed).
    InitDied,
}

/// One message from the other end of the channel; `None` when it is closed.
pub fn recv(sock: &OwnedFd) -> io::Result<Option<String>> {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match rustix::io::read(sock, &mut buf) {
            Ok(0) => return Ok(None),
            Ok(n) => return Ok(Some(String::from_utf8_lossy(&buf[..n]).into_owned())),
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// Send one message over the channel (a plain `write(2)`: the sandbox's first process sends
/// with it after its seccomp filter is in place).
pub fn send(sock: impl AsFd, msg: &str) -> io::Result<()> {
    rustix::io::write(sock, msg.as_bytes())?;
    Ok(())
}

fn serve(
    spec: &ConfineSpec,
    pid: libc::pid_t,
    sock: &OwnedFd,
    probe: bool,
) -> Result<Served, Failure> {
    let died = || Failure("the sandbox's first process died while it was being set up".into());
    let first = recv(sock)
        .map_err(|e| Failure::io("reading from the sandbox", e))?
        .ok_or_else(died)?;
    let (notify, diag) = match first.split_once(' ') {
        Some(("failed", why)) => return Err(Failure(why.to_string())),
        Some(("ready", fds)) => {
            let mut it = fds.split(' ').map(|n| n.parse::<i32>().unwrap_or(-1));
            (it.next().unwrap_or(-1), it.next().unwrap_or(-1))
        }
        _ => {
            return Err(Failure(format!(
                "unexpected message from the sandbox: {first:?}"
            )))
        }
    };
    let pidfd = rustix::process::pidfd_open(
        rustix::process::Pid::from_raw(pid).ok_or_else(died)?,
        rustix::process::PidfdFlags::empty(),
    )
    .map_err(|e| Failure::io("a pidfd for the sandbox", e))?;
    let take = |fd: i32, what: &str| -> Result<Option<OwnedFd>, Failure> {
        if fd < 0 {
            return Ok(None);
        }
        rustix::process::pidfd_getfd(&pidfd, fd, rustix::process::PidfdGetfdFlags::empty())
            .map(Some)
            .map_err(|e| Failure::io(&format!("taking the sandbox's {what} (pidfd_getfd)"), e))
    };
    let notify = take(notify, "seccomp listener")?
        .ok_or_else(|| Failure("the sandbox sent no seccomp listener".into()))?;
    let diag = take(diag, "socket table")?;
    send(sock, "go").map_err(|e| Failure::io("writing to the sandbox", e))?;
    if probe {
        let msg = recv(sock)
            .map_err(|e| Failure::io("reading from the sandbox", e))?
            .ok_or_else(died)?;
        return match msg.split_once(' ') {
            // After `go` the first process sends its report and nothing else (a failure of
            // its setup came before `ready`).
            Some(("report", json)) => Ok(Served::Probe(json.to_string())),
            _ => Err(Failure(format!(
                "unexpected message from the sandbox: {msg:?}"
            ))),
        };
    }
    let ctx = supervisor::Context::new(notify, diag, pid, spec)
        .map_err(|e| Failure::io("preparing the connect broker", e))?;
    let ended = supervisor::serve(ctx, sock);
    Ok(match ended {
        Some(raw) => Served::Ended(raw),
        None => Served::InitDied,
    })
}

/// Wait for the first process; its raw wait status.
fn reap(pid: libc::pid_t) -> i32 {
    let mut status = 0;
    loop {
        // SAFETY: waitpid on our own child with a valid status pointer.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            return status;
        }
        if r < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return status;
        }
    }
}

/// End as a process with wait status `raw` ended: its exit status, or the same signal.
fn relay(raw: i32) -> i32 {
    if libc::WIFEXITED(raw) {
        return libc::WEXITSTATUS(raw);
    }
    if libc::WIFSIGNALED(raw) {
        let sig = libc::WTERMSIG(raw);
        // SAFETY: resetting a disposition, unblocking and raising a signal on ourselves; no
        // core file is written (the command's own core, if any, was already handled).
        unsafe {
            let none = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::setrlimit(libc::RLIMIT_CORE, &none);
            libc::signal(sig, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::kill(libc::getpid(), sig);
        }
        return 128 + sig;
    }
    SETUP_FAILED
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `relay` in a child of the test process: how that child ends, as its wait status says
    /// (`Ok(code)` for an exit, `Err(signal)` for a signal).
    fn relayed_in_a_child(raw: i32) -> Result<i32, i32> {
        // SAFETY: the child only calls what `relay` calls (setrlimit, signal, sigprocmask,
        // kill) and then `_exit`; the parent waits for it.
        unsafe {
            let pid = libc::fork();
            assert!(pid >= 0, "fork");
            if pid == 0 {
                libc::_exit(relay(raw));
            }
            let mut status = 0;
            assert_eq!(libc::waitpid(pid, &mut status, 0), pid);
            if libc::WIFEXITED(status) {
                Ok(libc::WEXITSTATUS(status))
            } else {
                Err(libc::WTERMSIG(status))
            }
        }
    }

    /// The helper ends as the command ended: with its exit status, or by the same signal;
    /// a signal that does not end a process by default (which a status may still name) gives
    /// 128 and its number, as a shell reports it.
    #[test]
    fn the_helper_ends_as_its_command_ended() {
        let exited = |code: i32| code << 8;
        let killed = |sig: i32| sig;
        assert_eq!(relayed_in_a_child(exited(0)), Ok(0));
        assert_eq!(relayed_in_a_child(exited(3)), Ok(3));
        assert_eq!(
            relayed_in_a_child(killed(libc::SIGTERM)),
            Err(libc::SIGTERM)
        );
        assert_eq!(
            relayed_in_a_child(killed(libc::SIGKILL)),
            Err(libc::SIGKILL)
        );
        assert_eq!(
            relayed_in_a_child(killed(libc::SIGWINCH)),
            Ok(128 + libc::SIGWINCH)
        );
    }

    /// Only root with `CAP_SYS_ADMIN` in effect builds the sandbox without a user namespace:
    /// root without it (a container's root, say) needs one as any user does. Capabilities
    /// belong to a thread, so a thread of the test drops its own; before that, the control.
    #[test]
    fn only_root_with_cap_sys_admin_in_effect_is_privileged() {
        use rustix::thread::{capabilities, set_capabilities, CapabilitySet, CapabilitySets};
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        std::thread::spawn(move || {
            let caps = capabilities(None).unwrap();
            let admin = caps.effective.contains(CapabilitySet::SYS_ADMIN);
            assert_eq!(privileged(), root && admin);
            if root && admin {
                set_capabilities(
                    None,
                    CapabilitySets {
                        effective: caps.effective - CapabilitySet::SYS_ADMIN,
                        permitted: caps.permitted,
                        inheritable: caps.inheritable,
                    },
                )
                .unwrap();
                assert!(!privileged(), "root without CAP_SYS_ADMIN");
            }
        })
        .join()
        .unwrap();
    }

    /// The sandbox's first process opens the handshake with `failed <why>` when setting up
    /// failed: that is the failure, in its own words; `ready <fds>` goes on to take the
    /// descriptors it names; anything else is an unexpected message, and a channel closed
    /// first is a first process that died.
    #[test]
    fn the_handshake_reports_a_setup_failure_in_the_first_processs_words() {
        let spec = ConfineSpec::plain("/p".into(), "/t".into());
        // The test process stands for the first process: `ready` names no descriptor of it.
        let pid = std::process::id() as libc::pid_t;
        let opening = |first: Option<&str>| {
            let (ours, theirs) = rustix::net::socketpair(
                AddressFamily::UNIX,
                SocketType::SEQPACKET,
                SocketFlags::CLOEXEC,
                None,
            )
            .unwrap();
            if let Some(first) = first {
                send(&theirs, first).unwrap();
            }
            drop(theirs);
            match serve(&spec, pid, &ours, true) {
                Err(Failure(why)) => why,
                Ok(_) => panic!("{first:?} served"),
            }
        };
        let why = "cannot build the sandbox's view: /x: No such file or directory (os error 2)";
        assert_eq!(opening(Some(&format!("failed {why}"))), why);
        // A descriptor not given as a number is none, never another one.
        for ready in ["ready -1 -1", "ready x y", "ready 1x"] {
            assert_eq!(
                opening(Some(ready)),
                "the sandbox sent no seccomp listener",
                "{ready}"
            );
        }
        assert_eq!(
            opening(Some("hello there")),
            "unexpected message from the sandbox: \"hello there\""
        );
        assert_eq!(
            opening(None),
            "the sandbox's first process died while it was being set up"
        );
    }

    /// Every sandbox has mount, process and IPC namespaces of its own; a network namespace of
    /// its own unless the network is allowed; a user namespace when one is asked for (an
    /// unprivileged openmax); and no other flag.
    #[test]
    fn the_first_process_gets_the_namespaces_the_spec_asks_for() {
        let spec = ConfineSpec::plain("/p".into(), "/t".into());
        let known = libc::CLONE_NEWNS
            | libc::CLONE_NEWPID
            | libc::CLONE_NEWIPC
            | libc::CLONE_NEWNET
            | libc::CLONE_NEWUSER;
        for network in [false, true] {
            for user_ns in [false, true] {
                let f = clone_flags(
                    &ConfineSpec {
                        network,
                        ..spec.clone()
                    },
                    user_ns,
                );
                let has = |flag: libc::c_int| f & flag == flag;
                let case = format!("network {network}, user namespace {user_ns}: {f:#x}");
                assert!(has(libc::CLONE_NEWNS), "{case}");
                assert!(has(libc::CLONE_NEWPID), "{case}");
                assert!(has(libc::CLONE_NEWIPC), "{case}");
                assert_eq!(has(libc::CLONE_NEWNET), !network, "{case}");
                assert_eq!(has(libc::CLONE_NEWUSER), user_ns, "{case}");
                assert_eq!(f & !known, 0, "{case}");
            }
        }
    }
}
