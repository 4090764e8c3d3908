//! `shell`: `bash -c <command>` in the project, in its own process group.
//!
//! Invariants:
//! - stdin is `/dev/null`; stdout and stderr share one pipe (interleaved as written); the
//!   environment is openmax's as [`crate::sandbox::Policy::inherited_env`] filters it, with
//!   `OPENMAX_AGENT_SESSION` set to the context's session.
//! - The child leads a new process group. The leader is waited for without being reaped
//!   (`waitid(WNOWAIT)`), so its group id cannot be reused until every `killpg` below is done.
//! - However the command ends — exit, timeout, cancel, or the future being dropped — the
//!   whole group gets `SIGKILL` and the leader is reaped: no process of the group outlives the
//!   call (background children included; a process that left the group with `setsid` is out of
//!   reach of the group kill, and is killed by [`crate::sandbox::reaper::sweep`] right after).
//!   After the kill, output still in the pipe is read for at most [`DRAIN_GRACE`].
//! - The process runs in the sandbox the core chose for the call ([`ToolContext::run_sandbox`],
//!   from the run-tool effect): the session's, the read-only one (`readonly` mode), or none
//!   once a human approved `"sandbox": "off"`. The arguments only ask; they never decide.
//! - Output over `output_cap_bytes` keeps its head and tail with a notice of what was
//!   omitted; the last line says how it ended (`exit status: N`, `killed by signal N`,
//!   `timed out …`, `cancelled …`). The call is ok only for exit status 0.

use std::os::fd::OwnedFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, ExitStatus, Stdio};
use std::time::Duration;

use openmax_core::tool::{PlanSandbox, RunSandbox, ToolOutcome, ToolPlan};
use serde_json::Value;
use tokio::io::AsyncReadExt;
use tokio::sync::oneshot;

use super::args::Args;
use super::cap::cut_chars;
use super::{fail, invalid_plan, ToolContext};

/// Longest `timeout_s` accepted.
pub const MAX_TIMEOUT_S: f64 = 3600.0;
/// How long output is still read after the group was killed (for pipes held elsewhere).
pub const DRAIN_GRACE: Duration = Duration::from_secs(1);

const NAME: &str = "shell";

/// Added to the output of a failed command run in the read-only sandbox, so the model knows why
/// a write or a connection failed.
pub const READ_ONLY_NOTE: &str = "note: the approval mode is readonly, so this command ran in a \
     read-only sandbox (no writes but to $TMPDIR, no sockets or network); ask the user to switch \
     modes if it must change something";

struct Call {
    command: String,
    timeout: Duration,
    /// `"sandbox": "off"`: the model's justification for running outside the sandbox.
    escalate: Option<String>,
}

fn parse(ctx: &ToolContext, args: &Value) -> Result<Call, String> {
    let a = Args::new(
        NAME,
        args,
        &["command", "timeout_s", "sandbox", "justification"],
    )?;
    let command = a.string("command")?;
    if command.trim().is_empty() {
        return Err(format!("{NAME}: the command is empty"));
    }
    let justification = a.opt_string("justification")?.map(str::trim);
    let escalate = match a.opt_string("sandbox")? {
        None | Some("on") => None,
        Some("off") => match justification {
            Some(j) if !j.is_empty() => Some(j.to_string()),
            _ => {
                return Err(format!(
                    "{NAME}: \"sandbox\": \"off\" needs a \"justification\": one sentence for \
                     the human who approves it, saying why the command cannot run in the sandbox"
                ))
            }
        },
        Some(other) => {
            return Err(format!(
                "{NAME}: \"sandbox\" must be \"on\" or \"off\", got {other:?}"
            ))
        }
    };
    let timeout = match a.opt_seconds("timeout_s")? {
        Some(s) if s > MAX_TIMEOUT_S => {
            return Err(format!(
                "{NAME}: timeout_s must be at most {MAX_TIMEOUT_S} seconds, got {s}"
            ))
        }
        Some(s) => Duration::from_secs_f64(s),
        None => Duration::from_millis(ctx.shell_timeout_ms),
    };
    Ok(Call {
        command: command.to_string(),
        timeout,
        escalate,
    })
}

/// Inspect a `shell` call: the command line is the target; the core's rules judge what it runs.
/// The plan says whether the call asks to run outside the sandbox, or else whether it could run
/// in the read-only sandbox (so `readonly` mode runs it there).
pub fn plan(ctx: &ToolContext, args: &Value) -> ToolPlan {
    match parse(ctx, args) {
        Ok(c) => {
            let first = c.command.trim().lines().next().unwrap_or("");
            let more = if c.command.trim().lines().count() > 1 {
                " …"
            } else {
                ""
            };
            ToolPlan {
                mutating: true,
                targets: vec![c.command.clone()],
                summary: format!("{NAME}: {}{more}", cut_chars(first, 120)),
                detail: c.command,
                source: None,
                invalid: None,
                sandbox: match c.escalate {
                    Some(justification) => PlanSandbox::Escalate { justification },
                    None if ctx.sandbox.confine.read_only_available() => {
                        PlanSandbox::ReadOnlyCapable
                    }
                    None => PlanSandbox::Session,
                },
                confirm: None,
            }
        }
        Err(e) => invalid_plan(true, e),
    }
}

/// How the wait for the command ended.
enum End {
    Exited,
    TimedOut,
    Cancelled,
}

/// Run a `shell` call; `cancel` receiving `()` kills the group and returns promptly.
pub async fn run(
    ctx: &ToolContext,
    args: &Value,
    mut cancel: oneshot::Receiver<()>,
) -> ToolOutcome {
    let call = match parse(ctx, args) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let (reader, writer) = match std::io::pipe() {
        Ok(p) => p,
        Err(e) => return fail(format!("{NAME}: cannot create a pipe: {e}")),
    };
    let writer2 = match writer.try_clone() {
        Ok(w) => w,
        Err(e) => return fail(format!("{NAME}: cannot create a pipe: {e}")),
    };
    let vars = ctx.sandbox.inherited_env(&ctx.agent_session);
    let mut cmd = match ctx
        .sandbox
        .command_as("bash", &ctx.project, &vars, ctx.run_sandbox)
    {
        Ok(c) => c,
        Err(e) => return fail(format!("{NAME}: not run: {e}")),
    };
    cmd.arg("-c")
        .arg(&call.command)
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(writer2)
        .process_group(0);
    // Until the group is tracked, a sweep (after a call running beside this one) must not take
    // the new process for a stray.
    let spawning = crate::sandbox::reaper::spawning();
    let spawned = cmd.spawn();
    // The command holds our copies of the write end: drop it so EOF can arrive.
    drop(cmd);
    let child = match spawned {
        Ok(c) => c,
        Err(e) => return fail(format!("{NAME}: cannot start bash: {e}")),
    };
    let mut group = Group::new(child);
    let tracked = ctx.sandbox.track(group.pid);
    drop(spawning);
    let mut pipe = match tokio::net::unix::pipe::Receiver::from_owned_fd(OwnedFd::from(reader)) {
        Ok(p) => p,
        Err(e) => return fail(format!("{NAME}: cannot read the command's output: {e}")),
    };

    let pid = group.pid;
    let mut exited = tokio::task::spawn_blocking(move || wait_exited_nowait(pid));
    let deadline = tokio::time::sleep(call.timeout);
    tokio::pin!(deadline);
    let mut capture = Capture::new(ctx.output_cap_bytes.max(64));
    let mut buf = vec![0u8; 16 * 1024];
    let mut eof = false;
    let mut cancel_live = true;
    let end = loop {
        tokio::select! {
            r = pipe.read(&mut buf), if !eof => match r {
                Ok(0) | Err(_) => eof = true,
                Ok(n) => capture.push(&buf[..n]),
            },
            _ = &mut exited => break End::Exited,
            () = &mut deadline => break End::TimedOut,
            r = &mut cancel, if cancel_live => match r {
                Ok(()) => break End::Cancelled,
                // A dropped sender is not a cancel.
                Err(_) => cancel_live = false,
            },
        }
    };
    group.kill();
    if !matches!(end, End::Exited) {
        // The leader dies from the SIGKILL; its waiter returns then.
        let _ = exited.await;
    }
    let status = group.reap();
    // The group is gone; whatever escaped it (`setsid`, a double fork) was re-parented to
    // openmax and dies now.
    drop(tracked);
    let _ = tokio::task::spawn_blocking(crate::sandbox::reaper::sweep).await;
    // Read what is left; bounded, because a process outside the group may hold the pipe.
    if !eof {
        let drain = async {
            loop {
                match pipe.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => capture.push(&buf[..n]),
                }
            }
        };
        let _ = tokio::time::timeout(DRAIN_GRACE, drain).await;
    }
    let mut output = capture.finish();
    if !output.is_empty() && !output.ends_with('\n') {
        output.push('\n');
    }
    let (ok, last) = match end {
        End::TimedOut => (
            false,
            format!(
                "timed out after {}; the command and its process group were killed",
                secs(call.timeout)
            ),
        ),
        End::Cancelled => (
            false,
            "cancelled; the command and its process group were killed".to_string(),
        ),
        End::Exited => match status {
            Some(s) => (s.success(), describe(s)),
            None => (false, "exit status unknown".to_string()),
        },
    };
    if output.is_empty() {
        output.push_str("(no output)\n");
    }
    if !ok && ctx.run_sandbox == RunSandbox::ReadOnly {
        output.push_str(READ_ONLY_NOTE);
        output.push('\n');
    }
    output.push_str(&last);
    ToolOutcome {
        ok,
        output,
        diffs: Vec::new(),
        images: Vec::new(),
    }
}

fn describe(s: ExitStatus) -> String {
    match (s.code(), s.signal()) {
        (Some(code), _) => format!("exit status: {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}{}", signal_name(sig)),
        (None, None) => "exit status unknown".to_string(),
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGKILL => " (SIGKILL)",
        libc::SIGTERM => " (SIGTERM)",
        libc::SIGINT => " (SIGINT)",
        libc::SIGSEGV => " (SIGSEGV)",
        libc::SIGABRT => " (SIGABRT)",
        libc::SIGPIPE => " (SIGPIPE)",
        _ => "",
    }
}

fn secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0}s")
    } else {
        format!("{s:.1}s")
    }
}

/// Block until `pid` has exited, leaving it unreaped (a zombie keeps its group id reserved).
pub(crate) fn wait_exited_nowait(pid: libc::pid_t) {
    loop {
        // SAFETY: `siginfo_t` is plain data for which all-zero bytes are a valid value.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: `info` is a valid, writable `siginfo_t`; waitid only writes into it.
        let r = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return;
        }
    }
}

/// The child and its process group; dropping it kills the group and reaps the leader.
struct Group {
    pid: libc::pid_t,
    child: Option<Child>,
}

impl Group {
    fn new(child: Child) -> Self {
        Group {
            // A pid always fits: Linux pids are at most 2^22.
            pid: child.id() as libc::pid_t,
            child: Some(child),
        }
    }

    /// SIGKILL every process of the group (the leader may already be a zombie: harmless).
    fn kill(&self) {
        if self.child.is_some() {
            // SAFETY: plain syscall; the group id is ours (its leader is not reaped yet).
            unsafe {
                libc::killpg(self.pid, libc::SIGKILL);
            }
        }
    }

    /// Reap the (dead) leader.
    fn reap(&mut self) -> Option<ExitStatus> {
        self.child.take().and_then(|mut c| c.wait().ok())
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SAFETY: as in `kill`; the leader is unreaped, so the group id is still ours.
            unsafe {
                libc::killpg(self.pid, libc::SIGKILL);
            }
            // Reap off-thread: the leader is dying but may not be dead yet.
            std::thread::spawn(move || {
                let _ = child.wait();
            });
        }
    }
}

/// Output kept under a byte cap: the first half and the last half, with the omitted count.
struct Capture {
    cap: usize,
    head: Vec<u8>,
    tail: Vec<u8>,
    total: usize,
}

impl Capture {
    fn new(cap: usize) -> Self {
        Capture {
            cap,
            head: Vec::new(),
            tail: Vec::new(),
            total: 0,
        }
    }

    fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len();
        let head_cap = self.cap / 2;
        if self.head.len() < head_cap {
            let take = (head_cap - self.head.len()).min(bytes.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        self.tail.extend_from_slice(bytes);
        let tail_cap = self.cap - head_cap;
        if self.tail.len() > 2 * tail_cap.max(4096) {
            let cut = self.tail.len() - tail_cap;
            self.tail.drain(..cut);
        }
    }

    fn finish(mut self) -> String {
        let tail_cap = self.cap - self.cap / 2;
        if self.tail.len() > tail_cap {
            let cut = self.tail.len() - tail_cap;
            self.tail.drain(..cut);
        }
        let kept = self.head.len() + self.tail.len();
        if kept >= self.total {
            let mut all = self.head;
            all.extend_from_slice(&self.tail);
            return String::from_utf8_lossy(&all).into_owned();
        }
        // Cut at line bounds where one is near, so the notice sits on its own line.
        let head = trim_to_line_end(&self.head);
        let tail = trim_to_line_start(&self.tail);
        let omitted = self.total - head.len() - tail.len();
        format!(
            "{}\n[output truncated: {omitted} bytes omitted from the middle ({} bytes in total)]\n{}",
            String::from_utf8_lossy(head).trim_end_matches('\n'),
            self.total,
            String::from_utf8_lossy(tail)
        )
    }
}

fn trim_to_line_end(b: &[u8]) -> &[u8] {
    match b.iter().rposition(|&c| c == b'\n') {
        Some(i) if i + 1 >= b.len() / 2 => &b[..i + 1],
        _ => b,
    }
}

fn trim_to_line_start(b: &[u8]) -> &[u8] {
    match b.iter().position(|&c| c == b'\n') {
        Some(i) if i < b.len() / 2 => &b[i + 1..],
        _ => b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_keeps_head_and_tail() {
        let mut c = Capture::new(100);
        for i in 0..1000 {
            c.push(format!("line {i}\n").as_bytes());
        }
        let s = c.finish();
        assert!(s.starts_with("line 0\nline 1\n"), "{s}");
        assert!(s.ends_with("line 999\n"), "{s}");
        assert!(s.contains("[output truncated: "), "{s}");
        assert!(s.len() < 200, "{}", s.len());
        let mut small = Capture::new(100);
        small.push(b"hello\n");
        assert_eq!(small.finish(), "hello\n");
    }
}
