//! The kernel's table of Unix sockets (`NETLINK_SOCK_DIAG`, what `ss -x` reads): which socket
//! is bound to a file or an abstract name. The connect broker finds the listener a `connect(2)`
//! would reach here, then asks whether it belongs to the sandbox ([`super::sockets`]).
//!
//! The table is per network namespace: a socket table opened inside the sandbox's own network
//! namespace (by its first process, before its filters) lists only sockets made inside.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `SOCK_DIAG_BY_FAMILY`.
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP: u16 = 0x300;
/// `UDIAG_SHOW_NAME | UDIAG_SHOW_VFS`.
const SHOW: u32 = 0x1 | 0x2;
const UNIX_DIAG_NAME: u16 = 0;
const UNIX_DIAG_VFS: u16 = 1;
const NETLINK_SOCK_DIAG: i32 = 4;

/// One Unix socket of the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnixSocket {
    /// The socket's own inode (`socket:[N]` in `/proc/<pid>/fd`).
    pub inode: u32,
    /// `SOCK_STREAM`, `SOCK_DGRAM` or `SOCK_SEQPACKET`.
    pub kind: u8,
    /// The TCP-like state (10: listening).
    pub state: u8,
    /// The file it is bound to: the file system's device (as `stat` reports it) and the
    /// file's inode number (its low 32 bits, as the kernel reports it).
    pub file: Option<(u64, u32)>,
    /// The bound name: a path, or `\0`-prefixed for an abstract name.
    pub name: Option<Vec<u8>>,
}

/// A socket table of the current network namespace.
pub fn open() -> std::io::Result<OwnedFd> {
    // SAFETY: socket(2) with integer arguments; the result is checked.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            NETLINK_SOCK_DIAG,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The kernel encodes a file system's device as `major << 20 | minor`; `stat` as glibc's
/// `makedev`.
fn stat_dev(kernel_dev: u32) -> u64 {
    let (major, minor) = (kernel_dev >> 20, kernel_dev & 0xf_ffff);
    libc::makedev(major, minor)
}

fn request() -> Vec<u8> {
    let mut msg = Vec::with_capacity(40);
    let len: u32 = 16 + 24;
    msg.extend_from_slice(&len.to_ne_bytes());
    msg.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    msg.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    msg.extend_from_slice(&1u32.to_ne_bytes()); // seq
    msg.extend_from_slice(&0u32.to_ne_bytes()); // pid
                                                // struct unix_diag_req
    msg.push(libc::AF_UNIX as u8);
    msg.push(0); // protocol
    msg.extend_from_slice(&0u16.to_ne_bytes());
    msg.extend_from_slice(&u32::MAX.to_ne_bytes()); // every state
    msg.extend_from_slice(&0u32.to_ne_bytes()); // any inode
    msg.extend_from_slice(&SHOW.to_ne_bytes());
    msg.extend_from_slice(&u32::MAX.to_ne_bytes()); // cookie: none
    msg.extend_from_slice(&u32::MAX.to_ne_bytes());
    msg
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// Parse one `unix_diag_msg` with its attributes.
fn parse_one(body: &[u8]) -> Option<UnixSocket> {
    let kind = *body.get(1)?;
    let state = *body.get(2)?;
    let inode = u32_at(body, 4)?;
    let mut sock = UnixSocket {
        inode,
        kind,
        state,
        file: None,
        name: None,
    };
    let mut at = 16;
    while at + 4 <= body.len() {
        let len = usize::from(u16_at(body, at)?);
        let ty = u16_at(body, at + 2)?;
        if len < 4 || at + len > body.len() {
            break;
        }
        let data = &body[at + 4..at + len];
        match ty {
            UNIX_DIAG_NAME => sock.name = Some(data.to_vec()),
            UNIX_DIAG_VFS if data.len() >= 8 => {
                let ino = u32_at(data, 0)?;
                let dev = u32_at(data, 4)?;
                sock.file = Some((stat_dev(dev), ino));
            }
            _ => {}
        }
        at += (len + 3) & !3;
    }
    Some(sock)
}

/// Every Unix socket of the table's network namespace.
pub fn dump(table: &OwnedFd) -> std::io::Result<Vec<UnixSocket>> {
    let req = request();
    // SAFETY: a zeroed sockaddr_nl addresses the kernel.
    let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    kernel.nl_family = libc::AF_NETLINK as u16;
    // SAFETY: the buffer and the address are valid for the lengths passed.
    let sent = unsafe {
        libc::sendto(
            table.as_raw_fd(),
            req.as_ptr().cast(),
            req.len(),
            0,
            (&kernel as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as u32,
        )
    };
    if sent < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        // SAFETY: reading into our own buffer.
        let n = unsafe { libc::recv(table.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            // Nothing more will come (the kernel always ends a dump with NLMSG_DONE).
            return Ok(out);
        }
        if let Some(end) = walk(&buf[..n as usize], &mut out) {
            return end.map(|()| out);
        }
    }
}

/// The messages of one datagram of the dump: each socket is added to `out`. `Some` when the
/// dump ends in it: done, the kernel's error, or a message that does not fit (the table read
/// so far is kept); `None` when more is to be read.
fn walk(data: &[u8], out: &mut Vec<UnixSocket>) -> Option<std::io::Result<()>> {
    let mut at = 0;
    while at + 16 <= data.len() {
        let len = u32_at(data, at)? as usize;
        let ty = u16_at(data, at + 4).unwrap_or(NLMSG_DONE);
        if len < 16 || at + len > data.len() {
            return Some(Ok(()));
        }
        match ty {
            NLMSG_DONE => return Some(Ok(())),
            NLMSG_ERROR => {
                let code = u32_at(data, at + 16)
                    .map(|c| c as i32)
                    .unwrap_or(-libc::EIO);
                return Some(Err(std::io::Error::from_raw_os_error(-code)));
            }
            SOCK_DIAG_BY_FAMILY => {
                if let Some(s) = parse_one(&data[at + 16..at + len]) {
                    out.push(s);
                }
            }
            _ => {}
        }
        at += (len + 3) & !3;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A netlink message: header (length, type, flags, sequence, port) and `body`, padded to 4.
    fn message(ty: u16, body: &[u8]) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&(16 + body.len() as u32).to_ne_bytes());
        m.extend_from_slice(&ty.to_ne_bytes());
        m.extend_from_slice(&2u16.to_ne_bytes());
        m.extend_from_slice(&1u32.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend_from_slice(body);
        m.resize(m.len().next_multiple_of(4), 0);
        m
    }

    /// An attribute: length, type, data, padded to 4.
    fn attr(ty: u16, data: &[u8]) -> Vec<u8> {
        let mut a = Vec::new();
        a.extend_from_slice(&(4 + data.len() as u16).to_ne_bytes());
        a.extend_from_slice(&ty.to_ne_bytes());
        a.extend_from_slice(data);
        a.resize(a.len().next_multiple_of(4), 0);
        a
    }

    /// A `unix_diag_msg` (family, type, state, pad, inode, cookie) followed by `attrs`.
    fn socket(inode: u32, state: u8, attrs: &[Vec<u8>]) -> Vec<u8> {
        let mut b = vec![libc::AF_UNIX as u8, libc::SOCK_STREAM as u8, state, 0];
        b.extend_from_slice(&inode.to_ne_bytes());
        b.extend_from_slice(&[0xff; 8]);
        for a in attrs {
            b.extend_from_slice(a);
        }
        b
    }

    #[test]
    fn a_dump_is_read_message_by_message_until_done_or_the_kernels_error() {
        let mut vfs = 7u32.to_ne_bytes().to_vec();
        vfs.extend_from_slice(&((8u32 << 20) | 1).to_ne_bytes());
        let named = message(
            SOCK_DIAG_BY_FAMILY,
            &socket(11, 10, &[attr(UNIX_DIAG_NAME, b"\0abc"), attr(99, b"skip")]),
        );
        let bound = message(
            SOCK_DIAG_BY_FAMILY,
            &socket(12, 1, &[attr(UNIX_DIAG_VFS, &vfs)]),
        );
        // Two sockets and no end yet: more is to be read.
        let mut out = Vec::new();
        assert!(walk(&[named.clone(), bound.clone()].concat(), &mut out).is_none());
        assert_eq!(
            out,
            [
                UnixSocket {
                    inode: 11,
                    kind: libc::SOCK_STREAM as u8,
                    state: 10,
                    file: None,
                    name: Some(b"\0abc".to_vec()),
                },
                UnixSocket {
                    inode: 12,
                    kind: libc::SOCK_STREAM as u8,
                    state: 1,
                    file: Some((libc::makedev(8, 1), 7)),
                    name: None,
                },
            ]
        );
        // Done ends it; what follows is not read.
        let mut out = Vec::new();
        let end = walk(
            &[named.clone(), message(NLMSG_DONE, &[0; 4]), bound.clone()].concat(),
            &mut out,
        );
        assert!(matches!(end, Some(Ok(()))));
        assert_eq!(out.len(), 1);
        // The kernel's error (a negative errno after the header) ends it with that error.
        let mut out = Vec::new();
        let end = walk(
            &message(NLMSG_ERROR, &(-libc::EACCES).to_ne_bytes()),
            &mut out,
        );
        assert_eq!(end.unwrap().unwrap_err().raw_os_error(), Some(libc::EACCES));
        // An error message cut before its errno is an I/O error still.
        let mut out = Vec::new();
        let end = walk(&message(NLMSG_ERROR, &[]), &mut out);
        assert_eq!(end.unwrap().unwrap_err().raw_os_error(), Some(libc::EIO));
        // A message whose length is too short or runs past the datagram ends the table.
        for bad_len in [8u32, 4096] {
            let mut m = named.clone();
            m[..4].copy_from_slice(&bad_len.to_ne_bytes());
            let mut out = Vec::new();
            assert!(matches!(walk(&m, &mut out), Some(Ok(()))), "{bad_len}");
            assert!(out.is_empty());
        }
    }

    /// A table that refuses the request is that error, never what happens to wait on it: a
    /// Unix datagram socket refuses a netlink address (EINVAL) while a whole dump (done, no
    /// socket) waits to be read from it.
    #[test]
    fn a_refused_request_is_the_error_not_what_waits_on_the_table() {
        let mut fds = [0; 2];
        // SAFETY: socketpair(2) fills the two descriptors, owned from here on.
        let (table, peer) = unsafe {
            let kind = libc::SOCK_DGRAM | libc::SOCK_CLOEXEC;
            assert_eq!(
                libc::socketpair(libc::AF_UNIX, kind, 0, fds.as_mut_ptr()),
                0
            );
            (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1]))
        };
        let done = message(NLMSG_DONE, &[0; 4]);
        // SAFETY: sending our own buffer on our own socket.
        let sent = unsafe { libc::send(peer.as_raw_fd(), done.as_ptr().cast(), done.len(), 0) };
        assert_eq!(sent, done.len() as isize);
        // The control: what waits is a whole dump, which reading would take as the table.
        assert!(matches!(walk(&done, &mut Vec::new()), Some(Ok(()))));
        let e = dump(&table).expect_err("the request was refused");
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "{e}");
    }

    const NO_FDS_CHILD: &str = "OPENMAX_TEST_DIAG_NO_FDS_CHILD";

    /// With no descriptor left, opening the table is the kernel's error (EMFILE), never a
    /// socket numbered -1. The limit is process-wide, so the check runs in a child: this test
    /// executable re-run for this one test.
    #[test]
    fn the_table_cannot_be_opened_without_a_descriptor_left() {
        let name =
            "sandbox::helper::diag::tests::the_table_cannot_be_opened_without_a_descriptor_left";
        if std::env::var_os(NO_FDS_CHILD).is_some() {
            let mut lim = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: getrlimit/setrlimit with a valid struct; this child runs this test alone.
            unsafe {
                assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim), 0);
                lim.rlim_cur = 0;
                assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &lim), 0);
            }
            let e = open().expect_err("no descriptor left");
            assert_eq!(e.raw_os_error(), Some(libc::EMFILE), "{e}");
            return;
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", name, "--test-threads=1", "--nocapture"])
            .env(NO_FDS_CHILD, "1")
            .output()
            .unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success() && said.contains("1 passed"), "{said}");
    }

    /// Each attribute is stepped over to the next at its 4-byte boundary, whatever its length.
    #[test]
    fn every_attribute_after_a_name_of_any_length_is_read() {
        let mut vfs = 7u32.to_ne_bytes().to_vec();
        vfs.extend_from_slice(&((8u32 << 20) | 1).to_ne_bytes());
        for n in 1..=9 {
            let name = vec![b'a'; n];
            let s = parse_one(&socket(
                5,
                10,
                &[attr(UNIX_DIAG_NAME, &name), attr(UNIX_DIAG_VFS, &vfs)],
            ))
            .unwrap();
            assert_eq!(s.name.as_deref(), Some(&name[..]), "name of {n}");
            assert_eq!(s.file, Some((stat_dev((8 << 20) | 1), 7)), "name of {n}");
        }
    }

    #[test]
    fn an_attribute_too_short_or_too_long_ends_a_sockets_attributes() {
        let name = attr(UNIX_DIAG_NAME, b"/s");
        for bad_len in [0u16, 3, 200] {
            let mut bad = attr(UNIX_DIAG_NAME, b"/x");
            bad[..2].copy_from_slice(&bad_len.to_ne_bytes());
            // The bad attribute first: nothing after it is read.
            let s = parse_one(&socket(5, 10, &[bad.clone(), name.clone()])).unwrap();
            assert_eq!(s.name, None, "length {bad_len}");
            // After a good one: the good one is kept.
            let s = parse_one(&socket(5, 10, &[name.clone(), bad])).unwrap();
            assert_eq!(s.name.as_deref(), Some(&b"/s"[..]), "length {bad_len}");
        }
        // A body too short for a socket is none.
        assert_eq!(parse_one(&[1, 2]), None);
    }

    #[test]
    fn a_listening_socket_is_found_by_its_file_and_a_bound_name_by_its_name() {
        let dir = crate::scratch::path("diag");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        use std::os::unix::fs::MetadataExt;
        let table = open().unwrap();
        let all = dump(&table).unwrap();
        let found = all
            .iter()
            .find(|s| s.file == Some((meta.dev(), meta.ino() as u32)))
            .unwrap_or_else(|| panic!("not in {} sockets", all.len()));
        assert_eq!(found.state, 10, "listening");
        // A path is reported as bound: std passes its terminating NUL in the length.
        let name = found.name.clone().unwrap_or_default();
        assert_eq!(
            name.strip_suffix(&[0]).unwrap_or(&name),
            path.as_os_str().as_encoded_bytes()
        );
        let fd_link = format!("socket:[{}]", found.inode);
        let ours = std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .flatten()
            .any(|e| std::fs::read_link(e.path()).is_ok_and(|l| l.to_string_lossy() == fd_link));
        assert!(ours, "the listener's inode is one of our descriptors");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
