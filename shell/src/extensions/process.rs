//! Running a child process for openmax's agent: argv (no shell), its own process group, stdin
//! from bytes then closed, stdout and stderr captured up to a cap, and the whole group killed at
//! the timeout or on cancel, then reaped. Used by external tools and hooks.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;

use crate::sandbox::Policy;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

/// What to run.
#[derive(Debug, Clone)]
pub struct ProcessSpec {
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    /// The whole environment (the parent's is cleared).
    pub env: Vec<(String, String)>,
    pub stdin: Vec<u8>,
    pub timeout_ms: u64,
    /// Bytes kept per stream.
    pub output_cap: usize,
    /// How the process is prepared and contained.
    pub sandbox: Arc<Policy>,
}

/// How it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    Exited(i32),
    Signaled(i32),
    TimedOut,
    Cancelled,
    /// It could not be started.
    SpawnFailed(String),
}

impl Status {
    /// A line for the model or a `hook_failed` detail.
    pub fn describe(&self, timeout_ms: u64) -> String {
        match self {
            Status::Exited(c) => format!("exit status: {c}"),
            Status::Signaled(s) => format!("killed by signal {s}"),
            Status::TimedOut => format!(
                "timed out after {} ms; its process group was killed",
                timeout_ms
            ),
            Status::Cancelled => "cancelled; its process group was killed".to_string(),
            Status::SpawnFailed(e) => format!("could not start: {e}"),
        }
    }
}

/// What it printed and how it ended.
#[derive(Debug, Clone)]
pub struct ProcessResult {
    pub status: Status,
    pub stdout: String,
    pub stderr: String,
    /// Either stream went past the cap.
    pub truncated: bool,
}

/// Run to completion, timeout or cancel.
pub async fn run(
    spec: ProcessSpec,
    mut cancel: tokio::sync::oneshot::Receiver<()>,
) -> ProcessResult {
    let mut cmd = match spec
        .sandbox
        .tokio_command(&spec.argv[0], &spec.cwd, &spec.env)
    {
        Ok(c) => c,
        Err(e) => {
            return ProcessResult {
                status: Status::SpawnFailed(e),
                stdout: String::new(),
                stderr: String::new(),
                truncated: false,
            }
        }
    };
    cmd.args(&spec.argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    // As in the shell tool: no sweep may see the new process before it is tracked.
    let spawning = crate::sandbox::reaper::spawning();
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            return ProcessResult {
                status: Status::SpawnFailed(format!("{}: {e}", spec.argv[0])),
                stdout: String::new(),
                stderr: String::new(),
                truncated: false,
            }
        }
    };
    let pgid = child.id().map(|p| p as i32);
    // If this future is dropped mid-run (the runtime shutting down), the whole group dies too,
    // not only the leader `kill_on_drop` covers.
    let mut guard = GroupGuard(pgid);
    let tracked = pgid.map(|p| spec.sandbox.track(p));
    drop(spawning);
    let stdin = child.stdin.take();
    let input = spec.stdin.clone();
    let writer = tokio::spawn(async move {
        if let Some(mut s) = stdin {
            // A child that exits without reading its stdin is not an error.
            let _ = s.write_all(&input).await;
            let _ = s.shutdown().await;
        }
    });
    let cap = spec.output_cap;
    let out = tokio::spawn(read_capped(child.stdout.take(), cap));
    let err = tokio::spawn(read_capped(child.stderr.take(), cap));
    let timeout = tokio::time::sleep(std::time::Duration::from_millis(spec.timeout_ms));
    tokio::pin!(timeout);
    // Wait for the leader's exit without reaping it: an unreaped leader keeps its group id
    // reserved, so the `killpg` below can never reach an unrelated group that reused the id.
    let mut exited = match pgid {
        Some(pid) => {
            tokio::task::spawn_blocking(move || crate::tools::command::wait_exited_nowait(pid))
        }
        None => tokio::task::spawn_blocking(|| ()),
    };
    let end = tokio::select! {
        _ = &mut exited => None,
        _ = &mut timeout => Some(Status::TimedOut),
        _ = &mut cancel => Some(Status::Cancelled),
    };
    // Nothing of the group outlives the call (a background child would keep the pipes open and
    // the readers waiting); the leader, dead or dying, is reaped only after.
    kill_group(pgid);
    guard.0 = None;
    let reaped = child.wait().await;
    // What escaped the group (`setsid`, a double fork) was re-parented to openmax: it dies now.
    drop(tracked);
    let _ = tokio::task::spawn_blocking(crate::sandbox::reaper::sweep).await;
    let status = match end {
        Some(s) => s,
        None => match reaped {
            Ok(s) => exit_status(s),
            Err(e) => Status::SpawnFailed(e.to_string()),
        },
    };
    writer.abort();
    let (stdout, t1) = out.await.unwrap_or_default();
    let (stderr, t2) = err.await.unwrap_or_default();
    ProcessResult {
        status,
        stdout,
        stderr,
        truncated: t1 || t2,
    }
}

fn exit_status(s: std::process::ExitStatus) -> Status {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (Some(c), _) => Status::Exited(c),
        (None, Some(sig)) => Status::Signaled(sig),
        (None, None) => Status::Exited(-1),
    }
}

/// Kills the group when dropped while still armed.
struct GroupGuard(Option<i32>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        kill_group(self.0);
    }
}

/// SIGKILL the process group led by `pgid` (the child was started with `process_group(0)`).
pub fn kill_group(pgid: Option<i32>) {
    if let Some(pgid) = pgid.filter(|p| *p > 0) {
        // SAFETY: killpg with a positive pgid of a group we created only sends a signal; an
        // already-gone group yields ESRCH, which is fine.
        unsafe {
            libc::killpg(pgid, libc::SIGKILL);
        }
    }
}

async fn read_capped<R: AsyncRead + Unpin>(r: Option<R>, cap: usize) -> (String, bool) {
    let Some(mut r) = r else {
        return (String::new(), false);
    };
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    let mut truncated = false;
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = cap.saturating_sub(kept.len());
                if n > room {
                    truncated = true;
                }
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    (String::from_utf8_lossy(&kept).into_owned(), truncated)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_positive_group_is_killed() {
        // killpg(0, …) is the caller's own group: this test process (and whatever ran it).
        kill_group(Some(0));
        kill_group(Some(-1));
        kill_group(None);
        let mut child = std::process::Command::new("sleep");
        std::os::unix::process::CommandExt::process_group(&mut child, 0);
        let mut child = child.arg("30").spawn().unwrap();
        kill_group(Some(child.id() as i32));
        let status = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
    }

    fn spec(cmd: &str, timeout_ms: u64) -> ProcessSpec {
        ProcessSpec {
            argv: vec!["bash".into(), "-c".into(), cmd.into()],
            cwd: std::env::temp_dir(),
            env: vec![("PATH".into(), std::env::var("PATH").unwrap_or_default())],
            stdin: b"{\"x\":1}".to_vec(),
            timeout_ms,
            output_cap: 64,
            sandbox: Arc::default(),
        }
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn stdin_env_cap_and_status() {
        let (_tx, rx) = tokio::sync::oneshot::channel();
        let r = rt().block_on(run(spec("cat; echo; env | grep -c . ; exit 3", 10_000), rx));
        assert_eq!(r.status, Status::Exited(3));
        assert!(r.stdout.starts_with("{\"x\":1}\n"), "{r:?}");
        let (_tx, rx) = tokio::sync::oneshot::channel();
        let r = rt().block_on(run(spec("head -c 1000 /dev/zero | tr '\\0' a", 10_000), rx));
        assert!(r.truncated && r.stdout.len() == 64);
        // Exactly the cap, in one write, is whole; one byte more is not.
        for (n, truncated) in [(64, false), (65, true)] {
            let (_tx, rx) = tokio::sync::oneshot::channel();
            let cmd = format!("head -c {n} /dev/zero | tr '\\0' a");
            let r = rt().block_on(run(spec(&cmd, 10_000), rx));
            assert_eq!((r.truncated, r.stdout.len()), (truncated, 64), "{n}");
        }
    }

    #[test]
    fn timeout_kills_the_group() {
        let marker = format!("omx-proc-{}", std::process::id());
        let (_tx, rx) = tokio::sync::oneshot::channel();
        let cmd = format!("(exec -a {marker} sleep 30) & sleep 30");
        let r = rt().block_on(run(spec(&cmd, 300), rx));
        assert_eq!(r.status, Status::TimedOut);
        let ps = std::process::Command::new("pgrep")
            .arg("-f")
            .arg(&marker)
            .output()
            .unwrap();
        assert!(
            ps.stdout.is_empty(),
            "left behind: {}",
            String::from_utf8_lossy(&ps.stdout)
        );
    }

    #[test]
    fn cancel_kills() {
        let (tx, rx) = tokio::sync::oneshot::channel();
        tx.send(()).unwrap();
        let r = rt().block_on(run(spec("sleep 30", 60_000), rx));
        assert_eq!(r.status, Status::Cancelled);
        let (_tx, rx) = tokio::sync::oneshot::channel();
        let mut s = spec("x", 100);
        s.argv = vec!["/nonexistent/bin".into()];
        assert!(matches!(
            rt().block_on(run(s, rx)).status,
            Status::SpawnFailed(_)
        ));
    }
}
