//! Standard error while the UI holds the terminal. Anything written to fd 2 then (openmax's
//! own warnings, a library's message, a child process that inherited it) would land raw in the
//! middle of the drawn screen, so fd 2 is a pipe for that time: a reader thread hands each
//! line to the UI, which shows it as a notice line above the live region. The real stderr is
//! put back on fd 2 before the terminal is restored on every way out ([`give_back`], called by
//! [`super::term::restore`]), so a panic message or a last error line reaches the terminal.
//!
//! Invariants: a line is at most [`MAX_LINE`] bytes (a longer one is cut into several); the
//! pipe is read as fast as it is written, so no writer blocks on the UI; every fd this module
//! makes is close-on-exec except fd 2 itself.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::mpsc;
use std::time::Duration;

/// The longest line handed on at once.
pub const MAX_LINE: u64 = 16 * 1024;

/// The real stderr while fd 2 is the pipe; -1 otherwise.
static SAVED: AtomicI32 = AtomicI32::new(-1);

/// fd 2 captured; see [`start`].
pub struct Capture {
    write: Option<OwnedFd>,
    done: mpsc::Receiver<()>,
}

fn os_err<T>(r: libc::c_int, ok: T) -> io::Result<T> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ok)
    }
}

/// Make fd 2 a pipe whose lines (without their line end, blank ones skipped) go to `on_line`,
/// on a thread of their own.
pub fn start(mut on_line: impl FnMut(String) + Send + 'static) -> io::Result<Capture> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 fills the two-element array it is given.
    let r = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    os_err(r, ())?;
    // SAFETY: both fds were just made by pipe2 and are owned by nothing else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: fcntl and dup2 on fds this process holds.
    let saved = unsafe { libc::fcntl(2, libc::F_DUPFD_CLOEXEC, 3) };
    os_err(saved, ())?;
    // SAFETY: as above.
    if let Err(e) = os_err(unsafe { libc::dup2(write.as_raw_fd(), 2) }, ()) {
        // SAFETY: `saved` is ours and not used elsewhere.
        unsafe { libc::close(saved) };
        return Err(e);
    }
    SAVED.store(saved, Ordering::SeqCst);
    let (done_tx, done) = mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("stderr".into())
        .spawn(move || {
            let mut reader = BufReader::new(File::from(read));
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match reader.by_ref().take(MAX_LINE).read_until(b'\n', &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let line = String::from_utf8_lossy(&buf);
                        let line = line.trim_end_matches(['\n', '\r']);
                        if !line.trim().is_empty() {
                            on_line(line.to_string());
                        }
                    }
                }
            }
            let _ = done_tx.send(());
        });
    if let Err(e) = spawned {
        give_back();
        return Err(e);
    }
    Ok(Capture {
        write: Some(write),
        done,
    })
}

/// Put the real stderr back on fd 2. Safe to call from any thread, any number of times.
pub fn give_back() {
    let fd = SAVED.swap(-1, Ordering::SeqCst);
    if fd >= 0 {
        // SAFETY: `fd` is the saved stderr this module owns; after dup2 it is closed once.
        unsafe {
            libc::dup2(fd, 2);
            libc::close(fd);
        }
    }
}

impl Capture {
    /// Give fd 2 back and wait, at most `wait`, until every line already written has been
    /// handed on (a child still holding the pipe open is not waited for longer).
    pub fn finish(mut self, wait: Duration) {
        give_back();
        self.write.take();
        let _ = self.done.recv_timeout(wait);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_written_to_fd_2_are_handed_on_and_fd_2_is_given_back() {
        let (tx, rx) = mpsc::channel();
        let cap = start(move |l| {
            let _ = tx.send(l);
        })
        .unwrap();
        let long = "x".repeat(MAX_LINE as usize + 10);
        let text = format!("first warning\n\nsecond\r\n{long}\nno newline");
        // SAFETY: a plain write(2) to fd 2.
        let n = unsafe { libc::write(2, text.as_ptr().cast(), text.len()) };
        assert_eq!(n as usize, text.len());
        cap.finish(Duration::from_secs(10));
        // Other tests of this process may write to fd 2 meanwhile: keep only ours.
        let ours = |l: &String| {
            ["first", "second", "x", "no newline"]
                .iter()
                .any(|p| l.starts_with(p))
        };
        let got: Vec<String> = rx.try_iter().filter(ours).collect();
        assert_eq!(got[0], "first warning");
        assert_eq!(got[1], "second");
        assert_eq!(got[2].len(), MAX_LINE as usize);
        assert_eq!(got[3], "x".repeat(10));
        assert_eq!(got[4], "no newline");
        assert_eq!(got.len(), 5);
        // fd 2 is the real stderr again: not a pipe this module made.
        assert_eq!(SAVED.load(Ordering::SeqCst), -1);
    }
}
