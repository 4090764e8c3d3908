//! One child session, driven over the contract: start `openmax --stdio` in its own tracked
//! process group, read `hello`, send the prompt as one `user`, read events until `done`, send
//! `quit`, and wait for the exit. A cancel sends `cancel` and waits for the child's `done`;
//! whatever does not answer within the drain deadline is killed with its group.
//!
//! The parent reads nothing but the contract's guarantees: it waits only for `done` (or the
//! end of the child's stdout, which means it died), never for any other event.

use std::collections::VecDeque;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::ChildStdin;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::progress::Watch;
use super::{Spawner, TaskArgs, AGENT_DEF_ENV, DEPTH_ENV};
use crate::extensions::agents::Agent;
use crate::extensions::process::kill_group;
use crate::sandbox::AGENT_ENV;

/// Bytes of the child's stderr kept (its last ones) for the report of a child that died.
const STDERR_TAIL: usize = 2000;

/// What the parent learned of the child's turn.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// The child's session id (from its `hello`).
    pub session_id: Option<String>,
    /// The text of its last `message_done`.
    pub text: Option<String>,
    /// Its `done`'s stop reason (`None`: it never sent one).
    pub stop_reason: Option<String>,
    /// Its `tool_start`s.
    pub tool_calls: u64,
    /// The sums of its `usage` lines.
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// The sum of their cached tokens (`None`: none reported), and how many there were.
    pub cached_tokens: Option<u64>,
    pub requests: u64,
    /// Its `error` and `protocol_error` messages.
    pub errors: Vec<String>,
    /// Its approval requests this call declined (no human answers a child's approvals yet).
    pub declined: Vec<String>,
    /// Why it ended without a `done` (it died, or could not start).
    pub died: Option<String>,
}

/// Stop reasons that end a call `ok: false`.
const FAILED: [&str; 6] = [
    "error",
    "truncated",
    "cancelled",
    "refused",
    "blocked",
    "unverified",
];

impl Report {
    /// Whether the child's turn ended normally.
    pub fn ok(&self) -> bool {
        self.died.is_none()
            && self
                .stop_reason
                .as_deref()
                .is_some_and(|r| !FAILED.contains(&r))
    }

    /// The child's usage, added up.
    pub fn usage(&self) -> openmax_core::usage::UsageTotals {
        openmax_core::usage::UsageTotals {
            prompt_tokens: self.prompt_tokens,
            completion_tokens: self.completion_tokens,
            cached_tokens: self.cached_tokens,
            requests: self.requests,
        }
    }

    /// The tool result the model reads.
    pub fn render(&self, description: &str) -> String {
        let how = match (&self.stop_reason, &self.died) {
            (_, Some(why)) => format!("failed: {why}"),
            (Some(r), None) => format!("ended {r}"),
            (None, None) => "ended without a done".to_string(),
        };
        let mut out = format!(
            "task \"{description}\" {how} (session {}, {} tool call{}, {} prompt + {} completion \
             tokens)",
            self.session_id.as_deref().unwrap_or("none"),
            self.tool_calls,
            if self.tool_calls == 1 { "" } else { "s" },
            self.prompt_tokens,
            self.completion_tokens,
        );
        for e in &self.errors {
            out.push_str("\nerror: ");
            out.push_str(e);
        }
        for d in &self.declined {
            out.push_str("\ndeclined: ");
            out.push_str(d);
        }
        out.push_str("\n\n");
        match &self.text {
            Some(t) => out.push_str(t),
            None => out.push_str("(the subagent sent no final message)"),
        }
        out
    }

    /// Take in one event line of the child.
    fn event(&mut self, v: &Value) -> Option<Answer> {
        let s = |k: &str| v[k].as_str().unwrap_or_default().to_string();
        match v["type"].as_str().unwrap_or_default() {
            "hello" => self.session_id = Some(s("session_id")),
            "message_done" => self.text = Some(s("text")),
            "tool_start" => self.tool_calls += 1,
            "usage" => {
                self.prompt_tokens += v["prompt_tokens"].as_u64().unwrap_or(0);
                self.completion_tokens += v["completion_tokens"].as_u64().unwrap_or(0);
                if let Some(c) = v["cached_tokens"].as_u64() {
                    self.cached_tokens = Some(self.cached_tokens.unwrap_or(0) + c);
                }
                self.requests += 1;
            }
            "error" | "protocol_error" => self.errors.push(s("message")),
            "approval_request" => {
                self.declined.push(format!(
                    "{} ({}): no human answers a subagent's approvals in this version, so it \
                     was not run",
                    s("summary"),
                    s("reason")
                ));
                return Some(Answer::Decline(s("approval_id")));
            }
            "done" => {
                self.stop_reason = Some(s("stop_reason"));
                return Some(Answer::Done);
            }
            _ => {}
        }
        None
    }
}

/// What an event asks of the parent.
enum Answer {
    Decline(String),
    Done,
}

/// Kills the child's group when dropped while armed (the call's future dropped mid-run).
struct GroupGuard(Option<i32>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        kill_group(self.0);
    }
}

/// Start the child in `project` (the parent's, or its worktree), as `agent` when named, drive
/// its one turn, end it.
pub async fn drive(
    sp: &Spawner,
    a: &TaskArgs,
    agent: Option<&Agent>,
    project: &std::path::Path,
    watch: &Watch,
    mut cancel: oneshot::Receiver<()>,
) -> Report {
    let mut report = Report::default();
    let mut cmd = tokio::process::Command::new(&sp.exe);
    let model = agent.and_then(|g| g.model.as_deref()).unwrap_or(&sp.model);
    cmd.arg("--stdio").arg("--project").arg(project).args([
        "--provider",
        &sp.provider,
        "--model",
        model,
    ]);
    if let Some(url) = &sp.base_url {
        cmd.args(["--base-url", url]);
    }
    match agent.map(serde_json::to_string) {
        Some(Ok(def)) => {
            cmd.env(AGENT_DEF_ENV, def);
        }
        _ => {
            cmd.env_remove(AGENT_DEF_ENV);
        }
    }
    cmd.current_dir(project)
        .env("OPENMAX_HOME", &sp.home)
        .env(AGENT_ENV, &sp.session_id)
        .env(DEPTH_ENV, (sp.depth + 1).to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some((name, value)) = &sp.key {
        cmd.env(name, value);
    }
    // No sweep may take the new process for a stray before it is tracked.
    let spawning = crate::sandbox::reaper::spawning();
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            report.died = Some(format!("could not start {}: {e}", sp.exe.display()));
            return report;
        }
    };
    let pgid = child.id().map(|p| p as i32);
    let mut guard = GroupGuard(pgid);
    let tracked = pgid.map(|p| sp.policy.track(p));
    drop(spawning);
    let err_tail = tokio::spawn(read_tail(child.stderr.take()));
    let mut stdin = child.stdin.take();
    let Some(stdout) = child.stdout.take() else {
        report.died = Some("its stdout was not captured".into());
        return report;
    };
    let mut lines = BufReader::new(stdout).lines();
    let drain = Duration::from_millis(sp.drain_ms.max(1));
    let mut deadline: Option<Instant> = None;
    let mut cancel_live = true;
    let mut sent_user = false;
    loop {
        let until = deadline.unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400));
        tokio::select! {
            biased;
            r = &mut cancel, if cancel_live => {
                cancel_live = false;
                if r.is_ok() {
                    send(&mut stdin, json!({"cmd": "cancel"})).await;
                    deadline = Some(Instant::now() + drain);
                }
            }
            () = tokio::time::sleep_until(until), if deadline.is_some() => {
                report.died = Some(format!(
                    "it did not end its turn within {} ms of the cancel; its process group \
                     was killed",
                    drain.as_millis()
                ));
                break;
            }
            line = lines.next_line() => match line {
                Ok(Some(l)) => {
                    let Ok(v) = serde_json::from_str::<Value>(&l) else { continue };
                    let first = !sent_user && v["type"] == "hello";
                    let answer = report.event(&v);
                    watch.tool_calls(report.tool_calls);
                    match answer {
                        Some(Answer::Done) => break,
                        Some(Answer::Decline(id)) => {
                            send(&mut stdin, json!({"cmd": "approve", "approval_id": id, "approved": false})).await;
                        }
                        None => {}
                    }
                    if first {
                        sent_user = true;
                        send(&mut stdin, json!({"cmd": "user", "text": a.prompt})).await;
                    }
                }
                Ok(None) | Err(_) => {
                    report.died = Some("it exited before its done".into());
                    break;
                }
            },
        }
    }
    // The turn is over (or the child is gone): quit, then the drain deadline, then the kill.
    send(&mut stdin, json!({"cmd": "quit"})).await;
    drop(stdin);
    let exited = tokio::time::timeout(drain, async {
        while let Ok(Some(_)) = lines.next_line().await {}
        child.wait().await
    })
    .await;
    kill_group(pgid);
    guard.0 = None;
    let status = match exited {
        Ok(Ok(s)) => Some(s),
        _ => child.wait().await.ok(),
    };
    drop(tracked);
    // What the child's own tools left behind was re-parented to openmax when it died.
    let _ = tokio::task::spawn_blocking(crate::sandbox::reaper::sweep).await;
    if let Some(why) = &mut report.died {
        if let Some(s) = status {
            why.push_str(&format!(" ({s})"));
        }
        let tail = err_tail.await.unwrap_or_default();
        let tail = tail.trim();
        if !tail.is_empty() {
            why.push_str("; its stderr ended with:\n");
            why.push_str(tail);
        }
    } else {
        err_tail.abort();
    }
    report
}

/// Write one command line; a child that is gone is noticed by its stdout's end.
async fn send(stdin: &mut Option<ChildStdin>, cmd: Value) {
    if let Some(s) = stdin {
        let mut line = cmd.to_string();
        line.push('\n');
        if s.write_all(line.as_bytes()).await.is_err() || s.flush().await.is_err() {
            *stdin = None;
        }
    }
}

/// The last [`STDERR_TAIL`] bytes of a stream, read to its end.
async fn read_tail(r: Option<tokio::process::ChildStderr>) -> String {
    let Some(mut r) = r else {
        return String::new();
    };
    let mut tail: VecDeque<u8> = VecDeque::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = r.read(&mut buf).await {
        if n == 0 {
            break;
        }
        tail.extend(&buf[..n]);
        while tail.len() > STDERR_TAIL {
            tail.pop_front();
        }
    }
    String::from_utf8_lossy(tail.make_contiguous()).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_reads_the_contract() {
        let mut r = Report::default();
        for l in [
            json!({"type":"hello","session_id":"c1"}),
            json!({"session_id":"c1","type":"tool_start","call_id":"x","name":"read_file","args":{}}),
            json!({"session_id":"c1","type":"usage","prompt_tokens":10,"completion_tokens":2,"cached_tokens":null}),
            json!({"session_id":"c1","type":"usage","prompt_tokens":5,"completion_tokens":1,"cached_tokens":null}),
            json!({"session_id":"c1","type":"message_done","text":"the answer"}),
        ] {
            assert!(r.event(&l).is_none());
        }
        assert!(matches!(
            r.event(&json!({"session_id":"c1","type":"done","stop_reason":"end_turn"})),
            Some(Answer::Done)
        ));
        assert!(r.ok());
        assert_eq!(
            (r.prompt_tokens, r.completion_tokens, r.tool_calls),
            (15, 3, 1)
        );
        let out = r.render("look");
        assert!(
            out.starts_with("task \"look\" ended end_turn (session c1, 1 tool call, 15 prompt")
                && out.ends_with("\n\nthe answer"),
            "{out}"
        );
        r.stop_reason = Some("truncated".into());
        assert!(!r.ok());
        r.stop_reason = Some("max_iterations".into());
        assert!(r.ok());
        r.died = Some("it exited before its done".into());
        assert!(!r.ok());
    }
}
