//! The kernel filters every agent process runs under, installed by the sandbox's first process
//! after the view is built and privileges are dropped, and inherited by everything it starts:
//!
//! - Landlock ([`landlock`]): reads everywhere; writes only beneath the writable places of the
//!   view and to the bound devices; with the network off, no TCP bind or connect; no signal to,
//!   and no abstract Unix socket of, a process outside the sandbox. A second fence behind the
//!   view's read-only mounts and namespaces.
//! - seccomp, refusing with `EACCES` ([`refusals`], compiled by `seccompiler`): every socket
//!   family but `AF_UNIX` (with the network on, also IPv4, IPv6 and route netlink), Unix
//!   datagram sockets (a datagram names its destination at each send, which the broker could not
//!   check), `io_uring` (it opens and connects sockets without these system calls), new
//!   namespaces, mounts, keyrings, `bpf`, `TIOCSTI`; in the read-only sandbox every socket and
//!   every call that changes a file without writing it.
//! - seccomp, handing every `connect(2)` to the helper ([`notify`], a short program written here
//!   because `seccompiler` has no user-notification action): the helper connects the socket
//!   itself when the address is allowed ([`super::supervisor`]). The same program refuses
//!   `clone3` with `ENOSYS` (its flags lie in memory a filter cannot read; C libraries fall back
//!   to `clone`, whose flags it can) and every x32 system call.

use std::os::fd::{FromRawFd, OwnedFd};
use std::path::PathBuf;

use landlock::{
    Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use super::Failure;

/// The newest Landlock ABI openmax asks for (the kernel may grant less).
pub const WANTED_ABI: ABI = ABI::V7;

/// What an agent process may write, as the view shows it.
#[derive(Debug, Clone, Default)]
pub struct Writable {
    /// Directories beneath which every write is allowed.
    pub dirs: Vec<PathBuf>,
    /// Devices that may be opened for writing.
    pub devices: Vec<PathBuf>,
}

/// Restrict this process (and what it starts) with Landlock; the ABI in force.
pub fn landlock(writable: &Writable, network: bool) -> Result<i32, Failure> {
    let abi = WANTED_ABI;
    let err = |e: &dyn std::fmt::Display| Failure(format!("cannot install Landlock: {e}"));
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))
        .map_err(|e| err(&e))?;
    if !network {
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
    for dir in &writable.dirs {
        let fd = PathFd::new(dir).map_err(|e| err(&format!("{}: {e}", dir.display())))?;
        created = created
            .add_rule(PathBeneath::new(fd, AccessFs::from_all(abi)))
            .map_err(|e| err(&e))?;
    }
    for dev in &writable.devices {
        let Ok(fd) = PathFd::new(dev) else { continue };
        created = created
            .add_rule(PathBeneath::new(fd, AccessFs::from_file(abi)))
            .map_err(|e| err(&e))?;
    }
    let status = created.restrict_self().map_err(|e| err(&e))?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err(Failure(super::super::spec::no_landlock()));
    }
    Ok(super::super::spec::kernel_abi())
}

fn arch() -> TargetArch {
    if cfg!(target_arch = "aarch64") {
        TargetArch::aarch64
    } else if cfg!(target_arch = "riscv64") {
        TargetArch::riscv64
    } else {
        TargetArch::x86_64
    }
}

/// The namespace flags of `clone` and `unshare` refused inside.
const NAMESPACES: [libc::c_int; 8] = [
    libc::CLONE_NEWNS,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWCGROUP,
    0x80, // CLONE_NEWTIME
];

/// System calls refused whatever their arguments: mounts, namespaces, keyrings, `bpf`,
/// `io_uring` and kernel modules. (Without capabilities most fail anyway; refusing them keeps
/// the kernel's surface small.)
const ALWAYS_REFUSED: &[libc::c_long] = &[
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_setns,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_open_tree,
    libc::SYS_move_mount,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_keyctl,
    libc::SYS_bpf,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
];

/// What the read-only sandbox refuses besides sockets: the system calls that change a file
/// without writing it, and those that create IPC objects.
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

/// `SOCK_TYPE_MASK`: the socket type without `SOCK_NONBLOCK` / `SOCK_CLOEXEC`.
const SOCK_TYPE_MASK: u64 = 0xf;

/// The refusing filter: every matching call fails with `EACCES`.
pub fn refusals(network: bool, read_only: bool) -> Result<BpfProgram, seccompiler::BackendError> {
    use libc::{AF_INET, AF_INET6, AF_NETLINK, AF_UNIX, SOCK_DGRAM, SOCK_RAW};
    let cond = |index: u8, op: SeccompCmpOp, value: u64| {
        SeccompCondition::new(index, SeccompCmpArgLen::Dword, op, value)
    };
    let arg_is =
        |index: u8, value: u64| SeccompRule::new(vec![cond(index, SeccompCmpOp::Eq, value)?]);
    let mut rules = std::collections::BTreeMap::new();
    // ioctl: pushing input into a terminal (TIOCSTI), or pasting a selection on a console.
    rules.insert(
        libc::SYS_ioctl,
        vec![arg_is(1, libc::TIOCSTI)?, arg_is(1, 0x541C)?],
    );
    for nr in ALWAYS_REFUSED {
        rules.insert(*nr, Vec::new());
    }
    // clone and unshare with a namespace flag.
    let ns_rules = || -> Result<Vec<SeccompRule>, seccompiler::BackendError> {
        NAMESPACES
            .iter()
            .map(|&f| SeccompRule::new(vec![cond(0, SeccompCmpOp::MaskedEq(f as u64), f as u64)?]))
            .collect()
    };
    rules.insert(libc::SYS_unshare, ns_rules()?);
    rules.insert(libc::SYS_clone, ns_rules()?);
    // Unix datagram sockets (and SOCK_RAW, which is a datagram socket for AF_UNIX).
    let unix_datagram = |ty: libc::c_int| {
        SeccompRule::new(vec![
            cond(0, SeccompCmpOp::Eq, AF_UNIX as u64)?,
            cond(1, SeccompCmpOp::MaskedEq(SOCK_TYPE_MASK), ty as u64)?,
        ])
    };
    if read_only {
        rules.insert(libc::SYS_socket, Vec::new());
        for nr in READ_ONLY_REFUSED {
            rules.insert(*nr, Vec::new());
        }
    } else {
        let mut socket_rules = vec![unix_datagram(SOCK_DGRAM)?, unix_datagram(SOCK_RAW)?];
        if network {
            socket_rules.push(SeccompRule::new(vec![
                cond(0, SeccompCmpOp::Ne, AF_UNIX as u64)?,
                cond(0, SeccompCmpOp::Ne, AF_INET as u64)?,
                cond(0, SeccompCmpOp::Ne, AF_INET6 as u64)?,
                cond(0, SeccompCmpOp::Ne, AF_NETLINK as u64)?,
            ])?);
            // Netlink for reading the routes and addresses only (getaddrinfo), nothing else.
            socket_rules.push(SeccompRule::new(vec![
                cond(0, SeccompCmpOp::Eq, AF_NETLINK as u64)?,
                cond(2, SeccompCmpOp::Ne, libc::NETLINK_ROUTE as u64)?,
            ])?);
        } else {
            socket_rules.push(SeccompRule::new(vec![cond(
                0,
                SeccompCmpOp::Ne,
                AF_UNIX as u64,
            )?])?);
        }
        rules.insert(libc::SYS_socket, socket_rules);
    }
    rules.insert(
        libc::SYS_socketpair,
        vec![
            SeccompRule::new(vec![cond(0, SeccompCmpOp::Ne, AF_UNIX as u64)?])?,
            unix_datagram(SOCK_DGRAM)?,
            unix_datagram(SOCK_RAW)?,
        ],
    );
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EACCES as u32),
        arch(),
    )?;
    BpfProgram::try_from(filter)
}

/// Install the refusing filter on this process.
pub fn install_refusals(network: bool, read_only: bool) -> Result<(), Failure> {
    let prog = refusals(network, read_only)
        .map_err(|e| Failure(format!("cannot build the seccomp filter: {e}")))?;
    seccompiler::apply_filter(&prog)
        .map_err(|e| Failure(format!("cannot install the seccomp filter: {e}")))
}

// Classic BPF, as the kernel's seccomp reads it: BPF_LD | BPF_W | BPF_ABS, BPF_JMP | BPF_JEQ |
// BPF_K, BPF_JMP | BPF_JGE | BPF_K, BPF_RET | BPF_K.
const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JEQ_K: u16 = 0x15;
const BPF_JGE_K: u16 = 0x35;
const BPF_RET_K: u16 = 0x06;
/// Offsets in `struct seccomp_data`.
const DATA_NR: u32 = 0;
const DATA_ARCH: u32 = 4;
/// `__X32_SYSCALL_BIT`.
const X32_BIT: u32 = 0x4000_0000;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;
#[cfg(target_arch = "riscv64")]
const AUDIT_ARCH: u32 = 0xC000_00F3;

fn stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// The notifying program: a foreign architecture kills the process, x32 calls and `clone3`
/// fail with `ENOSYS`, `connect` goes to the helper, the rest is allowed.
pub fn notify_program() -> Vec<libc::sock_filter> {
    let enosys = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;
    vec![
        stmt(BPF_LD_W_ABS, DATA_ARCH),
        jump(BPF_JEQ_K, AUDIT_ARCH, 1, 0),
        stmt(BPF_RET_K, libc::SECCOMP_RET_KILL_PROCESS),
        stmt(BPF_LD_W_ABS, DATA_NR),
        jump(BPF_JGE_K, X32_BIT, 0, 1),
        stmt(BPF_RET_K, enosys),
        jump(BPF_JEQ_K, libc::SYS_clone3 as u32, 0, 1),
        stmt(BPF_RET_K, enosys),
        jump(BPF_JEQ_K, libc::SYS_connect as u32, 0, 1),
        stmt(BPF_RET_K, libc::SECCOMP_RET_USER_NOTIF),
        stmt(BPF_RET_K, libc::SECCOMP_RET_ALLOW),
    ]
}

/// Install the notifying program; its listener, for the helper. Waits are killable only once
/// the helper has the call (`WAIT_KILLABLE_RECV`, Linux 6.0), so a program's own signals (Go
/// preempts with SIGURG) do not restart a `connect` the helper is already making; older
/// kernels get the plain wait.
pub fn install_notify() -> Result<OwnedFd, Failure> {
    let prog = notify_program();
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_ptr() as *mut libc::sock_filter,
    };
    let base = libc::SECCOMP_FILTER_FLAG_NEW_LISTENER;
    let sets = [base | libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, base];
    first_taken(&sets, |flags| {
        // SAFETY: a valid program that outlives the call; no_new_privs is set.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                flags,
                &fprog as *const libc::sock_fprog,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: the kernel returned a new descriptor we own.
        Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
    })
    .map_err(|e| {
        Failure::io(
            "cannot install the seccomp connect filter (user notification needs Linux 5.0)",
            e,
        )
    })
}

/// `attempt` with each flag set in turn until one is taken: a set refused with `EINVAL` (the
/// kernel lacks one of its flags) gives way to the next, any other refusal is the answer, and
/// when every set is refused the last refusal is.
fn first_taken<T>(
    sets: &[libc::c_ulong],
    mut attempt: impl FnMut(libc::c_ulong) -> std::io::Result<T>,
) -> std::io::Result<T> {
    let mut refused = std::io::Error::from_raw_os_error(libc::EINVAL);
    for &flags in sets {
        match attempt(flags) {
            Ok(taken) => return Ok(taken),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => refused = e,
            Err(e) => return Err(e),
        }
    }
    Err(refused)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The flag sets are tried in order: a kernel lacking a flag (`EINVAL`) gets the next set,
    /// another refusal ends the tries, and when every set is refused the last refusal stands.
    #[test]
    fn a_flag_set_the_kernel_lacks_gives_way_to_the_next_and_nothing_else_does() {
        let run = |answers: &[Result<u8, i32>]| {
            let mut tried = Vec::new();
            let got = first_taken(&[7, 5, 3][..answers.len()], |flags| {
                tried.push(flags);
                answers[tried.len() - 1].map_err(std::io::Error::from_raw_os_error)
            });
            (got.map_err(|e| e.raw_os_error().unwrap()), tried)
        };
        assert_eq!(run(&[Ok(1), Ok(2)]), (Ok(1), vec![7]));
        assert_eq!(run(&[Err(libc::EINVAL), Ok(2)]), (Ok(2), vec![7, 5]));
        assert_eq!(run(&[Err(libc::EPERM), Ok(2)]), (Err(libc::EPERM), vec![7]));
        assert_eq!(
            run(&[Err(libc::EINVAL), Err(libc::EINVAL), Err(libc::ENOSYS)]),
            (Err(libc::ENOSYS), vec![7, 5, 3])
        );
        assert_eq!(
            run(&[Err(libc::EINVAL), Err(libc::EINVAL)]),
            (Err(libc::EINVAL), vec![7, 5])
        );
    }

    /// The ABI the kernel is asked for against the landlock crate's own reading of it: every
    /// version whose file-system rights the crate can require outright is at most the kernel's.
    /// (Versions that add no file-system right, such as network or scope ones, are not told
    /// apart this way, so this is a bound from below.)
    #[test]
    fn the_kernels_landlock_abi_is_read_as_the_landlock_crate_reads_it() {
        let required = |v: i32| {
            Ruleset::default()
                .set_compatibility(CompatLevel::HardRequirement)
                .handle_access(AccessFs::from_all(ABI::from(v)))
                .and_then(|r| r.create())
                .is_ok()
        };
        let supported = (1..=ABI::V7 as i32)
            .filter(|v| required(*v))
            .max()
            .unwrap_or(0);
        let abi = crate::sandbox::spec::kernel_abi();
        assert!(
            abi >= supported,
            "read {abi}, the crate can require version {supported}"
        );
        assert_eq!(
            abi == 0,
            supported == 0,
            "read {abi}, the crate requires {supported}"
        );
    }

    /// Landlock on its own, without the view or namespaces it stands behind in a sandbox: in a
    /// thread of the test, whose ruleset binds only that thread.
    #[test]
    fn landlock_alone_lets_a_thread_write_only_beneath_its_writable_places() {
        if crate::sandbox::spec::kernel_abi() < 1 {
            eprintln!("note: this kernel has no Landlock; its layer is not checked here");
            return;
        }
        let base = crate::scratch::path("landlock");
        let _ = std::fs::remove_dir_all(&base);
        let (inside, outside) = (base.join("inside"), base.join("outside"));
        std::fs::create_dir_all(&inside).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        // The control: before the ruleset the thread may write both.
        std::fs::write(outside.join("control"), "x").unwrap();
        let writable = Writable {
            dirs: vec![inside.clone()],
            devices: vec![PathBuf::from("/dev/null")],
        };
        let (i, o) = (inside.clone(), outside.clone());
        let (abi, inside_write, outside_write, device_write) = std::thread::spawn(move || {
            let abi = landlock(&writable, true).expect("Landlock installed");
            let errno = |r: std::io::Result<()>| r.err().and_then(|e| e.raw_os_error());
            (
                abi,
                errno(std::fs::write(i.join("f"), "x")),
                errno(std::fs::write(o.join("f"), "x")),
                errno(
                    std::fs::OpenOptions::new()
                        .write(true)
                        .open("/dev/null")
                        .map(drop),
                ),
            )
        })
        .join()
        .unwrap();
        assert!(abi >= 1, "the ABI in force: {abi}");
        assert_eq!(inside_write, None);
        assert_eq!(outside_write, Some(libc::EACCES));
        assert_eq!(device_write, None);
        // The rest of the test process is not bound.
        std::fs::write(outside.join("after"), "x").unwrap();
        std::fs::remove_dir_all(&base).unwrap();
    }
}
