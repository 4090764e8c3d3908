//! The tie between openmax and the sandbox helpers it starts: a pipe whose write end only
//! openmax holds and never writes, whose read end every helper inherits ([`give`]). When openmax
//! dies, however it dies (SIGKILL, the OOM killer), the kernel closes the write end, the
//! helper's read returns end-of-file, and the helper kills the sandbox's first process, and with
//! it every process of the sandbox ([`watch`]). So a sandboxed command never outlives its
//! openmax, even where nobody runs openmax in that project again (the records of
//! [`super::reaper::kill_survivors`] remain for unsandboxed commands).
//!
//! Invariants:
//! - Both ends are close-on-exec in openmax: no other child inherits them. Only a helper's
//!   copy of the read end is made inheritable, in the forked child just before its exec.
//! - The helper makes its copy close-on-exec again before it starts anything, so nothing in
//!   the sandbox holds it across an exec.
//! - The descriptor is never 0, 1 or 2 (a process started with a standard stream closed would
//!   otherwise get the pipe there, where the child's stdio is put).

use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::process::Command;
use std::sync::OnceLock;

/// The pipe: (read end, write end). `None` when it could not be made (no descriptors left):
/// helpers then start without it, and only the project's records clean up after a crash.
static LINE: OnceLock<Option<(OwnedFd, OwnedFd)>> = OnceLock::new();

fn line() -> Option<&'static (OwnedFd, OwnedFd)> {
    LINE.get_or_init(|| {
        let (r, w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).ok()?;
        let r = rustix::io::fcntl_dupfd_cloexec(&r, 3).ok()?;
        let w = rustix::io::fcntl_dupfd_cloexec(&w, 3).ok()?;
        Some((r, w))
    })
    .as_ref()
}

/// Let the helper `cmd` starts inherit the read end; the descriptor number it will have
/// (for the helper's specification), or `None` when there is no pipe.
pub fn give(cmd: &mut Command) -> Option<RawFd> {
    use std::os::unix::process::CommandExt;
    let fd = line()?.0.as_raw_fd();
    // SAFETY: only fcntl(2), which is async-signal-safe, runs between fork and exec; it
    // changes the child's own copy of the descriptor.
    unsafe {
        cmd.pre_exec(move || {
            if libc::fcntl(fd, libc::F_SETFD, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Some(fd)
}

/// In the helper, first thing: take the inherited read end `fd` (close-on-exec from now on).
/// `None` when `fd` is not an open pipe's read end (a spec written by hand): the helper then
/// runs without the tie.
pub fn take(fd: RawFd) -> Option<OwnedFd> {
    if fd < 3 {
        return None;
    }
    // SAFETY: fcntl on a descriptor number; it fails with EBADF when nothing is open there.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags == -1 || flags & libc::O_ACCMODE != libc::O_RDONLY {
        return None;
    }
    // SAFETY: the descriptor is open (checked above) and only borrowed until it is taken.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    let st = rustix::fs::fstat(borrowed).ok()?;
    if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::Fifo {
        return None;
    }
    rustix::io::fcntl_setfd(borrowed, rustix::io::FdFlags::CLOEXEC).ok()?;
    // SAFETY: an open pipe's read end, given to this process for this use alone.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// In the helper, once the sandbox's first process `init` runs: a thread that waits for
/// openmax to be gone and then SIGKILLs `init` (whose death ends the sandbox's pid namespace;
/// the helper then ends as when a call is killed). Nothing is ever written to the pipe, so a
/// read returns only at end-of-file or on an error.
pub fn watch(read: OwnedFd, init: libc::pid_t) {
    // Without the thread (none can be made) the helper still ends with its call; only the
    // crash case is left to the project's records.
    let _ = std::thread::Builder::new()
        .name("lifeline".into())
        .spawn(move || {
            let mut buf = [0u8; 1];
            loop {
                match rustix::io::read(&read, &mut buf) {
                    Err(rustix::io::Errno::INTR) => continue,
                    Ok(n) if n > 0 => continue,
                    _ => break,
                }
            }
            // SAFETY: plain kill of the helper's own child.
            unsafe {
                libc::kill(init, libc::SIGKILL);
            }
        });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pipe_is_close_on_exec_above_the_standard_streams_and_taken_only_as_a_read_end() {
        let (r, w) = line().expect("a pipe");
        for end in [r, w] {
            assert!(end.as_raw_fd() >= 3);
            let fl = rustix::io::fcntl_getfd(end).unwrap();
            assert!(fl.contains(rustix::io::FdFlags::CLOEXEC));
        }
        // The write end, the standard streams and a closed number are refused.
        let dup_w = rustix::io::fcntl_dupfd_cloexec(w, 3).unwrap();
        let n = dup_w.as_raw_fd();
        std::mem::forget(dup_w);
        assert!(take(n).is_none());
        // SAFETY: closing the duplicate this test made.
        unsafe { libc::close(n) };
        assert!(take(0).is_none() && take(2).is_none());
        // A regular file opened read-only is not a pipe.
        let f = std::fs::File::open("/proc/self/stat").unwrap();
        let fd = std::os::fd::IntoRawFd::into_raw_fd(f);
        assert!(take(fd).is_none());
        // SAFETY: `take` refused it and left it open: close ours.
        unsafe { libc::close(fd) };
        // A duplicate of the read end is taken, and made close-on-exec.
        let dup_r = rustix::io::fcntl_dupfd_cloexec(r, 3).unwrap();
        let n = dup_r.as_raw_fd();
        std::mem::forget(dup_r);
        rustix::io::fcntl_setfd(
            // SAFETY: borrowed for this call only.
            unsafe { std::os::fd::BorrowedFd::borrow_raw(n) },
            rustix::io::FdFlags::empty(),
        )
        .unwrap();
        let taken = take(n).expect("the read end");
        assert!(rustix::io::fcntl_getfd(&taken)
            .unwrap()
            .contains(rustix::io::FdFlags::CLOEXEC));
    }
}
