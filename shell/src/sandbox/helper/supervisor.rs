//! The connect broker: every `connect(2)` an agent process makes is handed to the helper by
//! seccomp (user notification). The helper reads the address from the process's memory once,
//! decides ([`super::sockets`]), and, when allowed, connects the process's own socket itself
//! (a duplicate taken with `pidfd_getfd`, which shares the open file) to what it checked:
//! for a path, the very file it resolved (`/proc/self/fd/N` of an `O_PATH` descriptor). The
//! process never runs the call, so changing the address in its memory after the check (a
//! second thread, shared memory) changes nothing.
//!
//! Invariants:
//! - A path is resolved as the process would resolve it (its root and working directory,
//!   through `/proc/<pid>/root` with `RESOLVE_IN_ROOT`), never in the helper's own view, and no
//!   magic link is followed.
//! - A notification whose process is gone, or whose id the kernel no longer knows, is
//!   dropped; an id is checked after the process is pinned and after its memory is read.
//! - Each call is answered on a thread of its own (a blocking `connect` to a full listener, or
//!   a slow TCP handshake with the network on, holds up only itself), at most
//!   [`MAX_THREADS`] at once; past that, calls are answered in turn.
//! - The peer a connection reaches sees the helper as the connecting process
//!   (`SO_PEERCRED`'s pid is the helper's, outside the sandbox's pid namespace: 0 there).

use std::ffi::OsStr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::sockets::{Judge, Verdict};
use crate::sandbox::spec::ConfineSpec;

/// Calls answered at once on threads of their own.
pub const MAX_THREADS: usize = 256;

/// What the broker serves with.
#[derive(Debug)]
pub struct Context {
    listener: OwnedFd,
    judge: Judge,
    busy: AtomicUsize,
}

impl Context {
    /// `listener` is the sandbox's seccomp listener, `inside` its own socket table (network
    /// off), `init` its first process.
    pub fn new(
        listener: OwnedFd,
        inside: Option<OwnedFd>,
        init: libc::pid_t,
        spec: &ConfineSpec,
    ) -> std::io::Result<Context> {
        Ok(Context {
            listener,
            judge: Judge {
                inside: inside.map(Mutex::new),
                host: Mutex::new(super::diag::open()?),
                allowed: spec.unix_sockets.clone(),
                sandbox_proc: PathBuf::from(format!("/proc/{init}/root/proc")),
            },
            busy: AtomicUsize::new(0),
        })
    }
}

/// Answer notifications until the sandbox ends; return the raw wait status of PROGRAM that
/// the first process reported on `chan`, or `None` when it died without reporting.
pub fn serve(ctx: Context, chan: &OwnedFd) -> Option<i32> {
    let ctx = Arc::new(ctx);
    let loop_ctx = Arc::clone(&ctx);
    std::thread::Builder::new()
        .name("connect-broker".into())
        .spawn(move || notifications(loop_ctx))
        .ok()?;
    loop {
        match super::recv(chan) {
            Ok(Some(msg)) => {
                if let Some(raw) = msg.strip_prefix("exit ") {
                    return raw.trim().parse().ok();
                }
            }
            Ok(None) | Err(_) => return None,
        }
    }
}

fn notifications(ctx: Arc<Context>) {
    loop {
        let mut pfd = libc::pollfd {
            fd: ctx.listener.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut pfd, 1, -1) };
        if r < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        if pfd.revents & libc::POLLIN == 0 {
            // POLLHUP: every process of the sandbox is gone.
            return;
        }
        // SAFETY: the kernel wants a zeroed request to fill.
        let mut req: libc::seccomp_notif = unsafe { std::mem::zeroed() };
        // SAFETY: a valid listener and a request of the right size.
        let r = unsafe {
            libc::ioctl(
                ctx.listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_RECV,
                &mut req as *mut libc::seccomp_notif,
            )
        };
        if r < 0 {
            match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR) | Some(libc::ENOENT) => continue,
                _ => return,
            }
        }
        if ctx.busy.fetch_add(1, Ordering::AcqRel) < MAX_THREADS {
            let c = Arc::clone(&ctx);
            let spawned = std::thread::Builder::new()
                .stack_size(256 * 1024)
                .spawn(move || {
                    answer(&c, &req);
                    c.busy.fetch_sub(1, Ordering::AcqRel);
                });
            if spawned.is_err() {
                answer(&ctx, &req);
                ctx.busy.fetch_sub(1, Ordering::AcqRel);
            }
        } else {
            answer(&ctx, &req);
            ctx.busy.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Decide and answer one notification.
fn answer(ctx: &Context, req: &libc::seccomp_notif) {
    let error = match handle(ctx, req) {
        Some(e) => e,
        // Gone: nothing to answer.
        None => return,
    };
    let mut resp = libc::seccomp_notif_resp {
        id: req.id,
        val: 0,
        error: if error == 0 { 0 } else { -error },
        flags: 0,
    };
    // SAFETY: a valid listener and response; an error (the process is gone) is ignored.
    unsafe {
        libc::ioctl(
            ctx.listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SEND,
            &mut resp as *mut libc::seccomp_notif_resp,
        );
    }
}

fn id_valid(ctx: &Context, id: u64) -> bool {
    let mut id = id;
    // SAFETY: a valid listener and a u64 id.
    unsafe {
        libc::ioctl(
            ctx.listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
            &mut id as *mut u64,
        ) == 0
    }
}

/// A process's thread, pinned by a pidfd (of the thread where the kernel offers that, else of
/// its thread group).
fn pin(tid: u32) -> Option<OwnedFd> {
    const PIDFD_THREAD: libc::c_uint = libc::O_EXCL as libc::c_uint;
    for flags in [PIDFD_THREAD, 0] {
        // SAFETY: pidfd_open with integer arguments.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, tid as libc::pid_t, flags) };
        if fd >= 0 {
            // SAFETY: a new descriptor we own.
            return Some(unsafe { OwnedFd::from_raw_fd(fd as i32) });
        }
    }
    // A thread other than the leader on a kernel without thread pidfds: its group's.
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    let tgid: libc::pid_t = status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))?
        .trim()
        .parse()
        .ok()?;
    // SAFETY: as above.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, tgid, 0) };
    // SAFETY: a new descriptor we own.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// `len` bytes at `addr` in process `pid`.
fn read_memory(pid: u32, addr: u64, len: usize) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; len];
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: len,
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: len,
    };
    // SAFETY: our buffer is `len` bytes; the remote range is only read by the kernel.
    let n = unsafe { libc::process_vm_readv(pid as libc::pid_t, &local, 1, &remote, 1, 0) };
    (n == len as isize).then_some(buf)
}

fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// `connect(2)` on our duplicate; 0 or the errno.
fn connect_raw(sock: &OwnedFd, addr: &[u8]) -> i32 {
    // SAFETY: `addr` holds `addr.len()` bytes of a socket address.
    let r = unsafe { libc::connect(sock.as_raw_fd(), addr.as_ptr().cast(), addr.len() as u32) };
    if r == 0 {
        0
    } else {
        errno()
    }
}

/// `path` (bytes) as a `sockaddr_un`.
fn unix_addr(path: &[u8]) -> Vec<u8> {
    let mut a = Vec::with_capacity(2 + path.len() + 1);
    a.extend_from_slice(&(libc::AF_UNIX as u16).to_ne_bytes());
    a.extend_from_slice(path);
    a.push(0);
    a
}

/// Handle one notification: `Some(errno)` to answer (0: success), `None` when it is void.
fn handle(ctx: &Context, req: &libc::seccomp_notif) -> Option<i32> {
    if req.data.nr != libc::SYS_connect as i32 {
        return Some(libc::ENOSYS);
    }
    let fd = req.data.args[0] as i32;
    let addr = req.data.args[1];
    let len = req.data.args[2] as u32 as usize;
    if len > std::mem::size_of::<libc::sockaddr_storage>() {
        return Some(libc::EINVAL);
    }
    let pidfd = pin(req.pid)?;
    if !id_valid(ctx, req.id) {
        return None;
    }
    let bytes = match read_memory(req.pid, addr, len) {
        Some(b) => b,
        None => return Some(libc::EFAULT),
    };
    if !id_valid(ctx, req.id) {
        return None;
    }
    // SAFETY: pidfd_getfd with a pidfd we own; the result is checked.
    let dup = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
    if dup < 0 {
        return Some(match errno() {
            libc::ESRCH => return None,
            e => e,
        });
    }
    // SAFETY: a new descriptor we own.
    let sock = unsafe { OwnedFd::from_raw_fd(dup as i32) };
    let mut domain: libc::c_int = 0;
    let mut dlen = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt into an int of the size passed.
    let r = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_DOMAIN,
            (&mut domain as *mut libc::c_int).cast(),
            &mut dlen,
        )
    };
    if r != 0 {
        return Some(errno());
    }
    if domain != libc::AF_UNIX {
        // IPv4 and IPv6 exist only with the network on: connected as asked.
        return Some(connect_raw(&sock, &bytes));
    }
    // As the kernel's own check of a Unix address: longer than a `sockaddr_un` is EINVAL.
    if len <= 2
        || len > std::mem::size_of::<libc::sockaddr_un>()
        || u16::from_ne_bytes([bytes[0], bytes[1]]) != libc::AF_UNIX as u16
    {
        return Some(libc::EINVAL);
    }
    let name = &bytes[2..];
    if name[0] == 0 {
        return Some(match ctx.judge.abstract_name(name) {
            Verdict::Allow => connect_raw(&sock, &bytes),
            Verdict::Refuse(e) => e,
        });
    }
    let path = name.split(|b| *b == 0).next().unwrap_or(name);
    let target = match resolve(req.pid, path) {
        Ok(t) => t,
        Err(e) => return Some(e),
    };
    let st = match rustix::fs::fstat(&target) {
        Ok(st) => st,
        Err(e) => return Some(e.raw_os_error()),
    };
    if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::Socket {
        return Some(libc::ECONNREFUSED);
    }
    Some(match ctx.judge.file(st.st_dev, st.st_ino) {
        Verdict::Allow => {
            let via = format!("/proc/self/fd/{}", target.as_raw_fd());
            connect_raw(&sock, &unix_addr(via.as_bytes()))
        }
        Verdict::Refuse(e) => e,
    })
}

/// `path` as process `pid` resolves it: against its root and working directory, symlinks
/// followed inside that root, no magic link; an `O_PATH` descriptor of the file, or an errno.
fn resolve(pid: u32, path: &[u8]) -> Result<OwnedFd, i32> {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    let root = rustix::fs::open(
        format!("/proc/{pid}/root"),
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| e.raw_os_error())?;
    let full: Vec<u8> = if path.first() == Some(&b'/') {
        path.to_vec()
    } else {
        let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).map_err(|_| libc::ENOENT)?;
        let cwd = cwd.as_os_str().as_bytes();
        if cwd.ends_with(b" (deleted)") || cwd.first() != Some(&b'/') {
            return Err(libc::ENOENT);
        }
        let mut f = cwd.to_vec();
        f.push(b'/');
        f.extend_from_slice(path);
        f
    };
    rustix::fs::openat2(
        &root,
        OsStr::from_bytes(&full),
        OFlags::PATH | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS,
    )
    .map_err(|e| e.raw_os_error())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A relative path is resolved against the process's working directory, and to nothing
    /// once that directory is deleted (the kernel finds nothing there either), even where a
    /// directory named as the deleted one reads (`d (deleted)`) holds a file of that name.
    #[test]
    fn a_relative_path_from_a_deleted_working_directory_resolves_to_nothing() {
        let base = crate::scratch::path("resolve-deleted-cwd");
        let _ = std::fs::remove_dir_all(&base);
        let cwd = base.join("d");
        let decoy = base.join("d (deleted)");
        std::fs::create_dir_all(&cwd).unwrap();
        std::fs::create_dir_all(&decoy).unwrap();
        std::fs::write(cwd.join("sock"), "").unwrap();
        std::fs::write(decoy.join("sock"), "").unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .current_dir(&cwd)
            .spawn()
            .unwrap();
        let pid = child.id();
        // The control: while the directory is there, the relative path is its file.
        let before = resolve(pid, b"sock").map(drop);
        std::fs::remove_file(cwd.join("sock")).unwrap();
        std::fs::remove_dir(&cwd).unwrap();
        let after = resolve(pid, b"sock").map(drop);
        let decoy_by_name = resolve(pid, decoy.join("sock").as_os_str().as_bytes()).map(drop);
        let _ = child.kill();
        let _ = child.wait();
        std::fs::remove_dir_all(&base).unwrap();
        assert_eq!(before, Ok(()));
        assert_eq!(decoy_by_name, Ok(()));
        assert_eq!(after, Err(libc::ENOENT));
    }
}
