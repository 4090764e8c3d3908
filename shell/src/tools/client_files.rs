//! Text files a client holds (an editor's buffers, ACP's `fs` capability): when the session has
//! one, `read_file`, `write_file` and `edit_file` read the text of existing files and write
//! through it, so the model sees and edits what the user sees, saved or not.
//!
//! Invariants:
//! - The tools resolve and confine every path before the client is asked; the client only ever
//!   sees absolute paths inside the project.
//! - The client is asked about existing regular files only: a missing path is missing (a new
//!   file), a directory or special file is refused, as without a client.
//! - A capability the client does not offer falls back to the disk ([`ClientFiles::read`] and
//!   [`ClientFiles::write`] return `None`).
//! - Approval, the hooks and the sandbox are decided as without a client: this changes where
//!   bytes come from and go to, not whether a call may run.
//! - Waiting for the client is bounded by the call itself: its cancel and its time limit
//!   (`[limits] tool_timeout_s`) interrupt the wait ([`Stop::interrupted`]), and the end of the
//!   connection fails it. A write is sent past the call's commit point, so a write the client
//!   has not answered is reported as possibly made ([`ClientError::Unanswered`]), never as
//!   "nothing was written".

use std::path::Path;
use std::sync::Arc;

use super::stop::Stop;

/// Why the client gave no text or did not confirm a write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientError {
    /// The client answered with an error, or the connection ended first.
    Failed(String),
    /// The call was cancelled or ran out of time before the client answered.
    Unanswered,
}

/// A client's text files. Called from blocking threads; each call waits on the client until it
/// answers, the connection ends or `stop` is interrupted.
pub trait ClientFiles: Send + Sync {
    /// Whether the client reads files (else the disk is read).
    fn reads(&self) -> bool;
    /// Whether the client writes files (else the disk is written).
    fn writes(&self) -> bool;
    /// The text of `abs` as the client holds it.
    fn read(&self, abs: &Path, stop: &Stop) -> Result<String, ClientError>;
    /// Replace the text of `abs` through the client.
    fn write(&self, abs: &Path, text: &str, stop: &Stop) -> Result<(), ClientError>;
}

/// The session's client files, if any (compared by identity).
#[derive(Clone, Default)]
pub struct ClientFilesRef(pub Option<Arc<dyn ClientFiles>>);

impl ClientFilesRef {
    /// The client's text of `abs`, or `None` to read the disk.
    pub fn read(&self, abs: &Path, stop: &Stop) -> Option<Result<String, ClientError>> {
        let c = self.0.as_ref().filter(|c| c.reads())?;
        stop.set_client_wait(true);
        let r = c.read(abs, stop);
        stop.set_client_wait(false);
        Some(r)
    }

    /// Whether writes go through the client.
    pub fn writes(&self) -> bool {
        self.0.as_ref().is_some_and(|c| c.writes())
    }

    /// Write through the client (only when [`ClientFilesRef::writes`]; past the call's commit
    /// point).
    pub fn write(&self, abs: &Path, text: &str, stop: &Stop) -> Result<(), ClientError> {
        let Some(c) = self.0.as_ref() else {
            return Err(ClientError::Failed("no client files".into()));
        };
        stop.set_client_wait(true);
        let r = c.write(abs, text, stop);
        stop.set_client_wait(false);
        r
    }
}

impl std::fmt::Debug for ClientFilesRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "ClientFiles(client)"
        } else {
            "ClientFiles(disk)"
        })
    }
}

impl PartialEq for ClientFilesRef {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Eq for ClientFilesRef {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::{run, ToolContext};
    use serde_json::json;
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

    /// A client that never answers: each request waits until the call is interrupted.
    struct Silent {
        /// A request reached the client.
        asked: Arc<AtomicBool>,
    }

    impl ClientFiles for Silent {
        fn reads(&self) -> bool {
            true
        }
        fn writes(&self) -> bool {
            true
        }
        fn read(&self, _abs: &Path, stop: &Stop) -> Result<String, ClientError> {
            self.asked.store(true, Ordering::Release);
            while !stop.interrupted() {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Err(ClientError::Unanswered)
        }
        fn write(&self, _abs: &Path, _text: &str, stop: &Stop) -> Result<(), ClientError> {
            self.read(_abs, stop).map(|_| ())
        }
    }

    fn project() -> (PathBuf, ToolContext, Arc<AtomicBool>) {
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "omx-client-files-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("a.txt"), "on disk\n").unwrap();
        let mut ctx = ToolContext::new(&dir, "t").unwrap();
        let asked = Arc::new(AtomicBool::new(false));
        let client = Silent {
            asked: Arc::clone(&asked),
        };
        ctx.client_files = ClientFilesRef(Some(Arc::new(client)));
        (dir, ctx, asked)
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn a_client_that_never_answers_a_read_fails_the_call_at_its_time_limit_naming_the_client() {
        let (dir, mut ctx, _) = project();
        // Long enough for the blocking thread to be waiting on the client when it passes.
        ctx.tool_timeout_ms = 1000;
        let (_keep, cancel) = tokio::sync::oneshot::channel();
        let out = runtime().block_on(run(&ctx, "read_file", &json!({"path": "a.txt"}), cancel));
        assert!(!out.ok);
        assert_eq!(
            out.output,
            "read_file: timed out after 1 s (the [limits] tool_timeout_s limit); the client \
             did not answer its file request in time"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_write_the_client_never_answers_is_reported_as_possibly_made_on_cancel_and_at_the_limit() {
        let (dir, mut ctx, asked) = project();
        let args = json!({"path": "new.txt", "content": "x\n"});
        let rt = runtime();
        // Cancelled while the write is out.
        let (tx, cancel) = tokio::sync::oneshot::channel();
        let out = rt.block_on(async {
            let call = run(&ctx, "write_file", &args, cancel);
            tokio::pin!(call);
            while !asked.load(Ordering::Acquire) {
                tokio::select! {
                    _ = &mut call => panic!("the write was answered"),
                    () = tokio::time::sleep(std::time::Duration::from_millis(5)) => {}
                }
            }
            tx.send(()).unwrap();
            call.await
        });
        assert!(!out.ok);
        assert!(
            out.output.contains("the client may still write it"),
            "{}",
            out.output
        );
        assert!(
            !out.output.contains("nothing was written"),
            "{}",
            out.output
        );
        // Out of time while the write is out.
        ctx.tool_timeout_ms = 1000;
        let (_keep, cancel) = tokio::sync::oneshot::channel();
        let out = rt.block_on(run(&ctx, "write_file", &args, cancel));
        assert!(!out.ok);
        assert!(
            out.output.contains("the client may still write it"),
            "{}",
            out.output
        );
        assert!(
            !dir.join("new.txt").exists(),
            "the client, not the disk, writes"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
