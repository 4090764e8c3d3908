//! One child session, driven over the contract: start `openmax --stdio` in its own tracked
//! process group, read `hello`, send the prompt as one `user`, read events until `done`, send
//! `quit`, and wait for the exit. A cancel sends `cancel` and waits for the child's `done`;
//! whatever does not answer within the drain deadline is killed with its group.
//!
//! The parent reads nothing but the contract's guarantees: it waits only for `done` (or the
//! end of the child's stdout, which means it died), never for any other event.
//!
//! The child's `approval_request`s go up to this session's core ([`super::Link`]) and its
//! answers come down as `approve` commands; an approval the child settles itself before an
//! answer came (its own timeout) is reported up too. Without a link (no core to ask) a
//! request is declined at once.

use std::collections::VecDeque;
use std::process::Stdio;
use std::time::Duration;

use std::collections::BTreeMap;

use openmax_core::machine::{ChildApproval, Input};
use openmax_core::wire::{ApprovalOutcome, ApprovalReason};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::ChildStdin;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::progress::Watch;
use super::{Link, Spawner, TaskArgs, AGENT_DEF_ENV, DEPTH_ENV, MODE_ENV};
use crate::extensions::agents::Agent;
use crate::extensions::process::kill_group;
use crate::human::AGENT_ENV;

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
    /// Its approval requests that were declined (by the human, by the mode's rule, or at
    /// shutdown): their summaries.
    pub declined: Vec<String>,
    /// Its approval requests sent up and not answered yet: the child's id → its summary.
    asked: BTreeMap<String, String>,
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
                let reason = match v["reason"].as_str() {
                    Some("unapproved_source") => ApprovalReason::UnapprovedSource,
                    _ => ApprovalReason::Gate,
                };
                let env = v["env"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|e| e.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default();
                self.asked.insert(s("approval_id"), s("summary"));
                return Some(Answer::Ask(ChildApproval {
                    approval_id: s("approval_id"),
                    description: String::new(),
                    name: s("name"),
                    summary: s("summary"),
                    detail: s("detail"),
                    reason,
                    source_path: s("source_path"),
                    source_sha: s("source_sha"),
                    env,
                }));
            }
            "approval_settled" => {
                let id = s("approval_id");
                if self.asked.remove(&id).is_some() {
                    let outcome = match v["outcome"].as_str() {
                        Some("timed_out") => ApprovalOutcome::TimedOut,
                        Some("declined") => ApprovalOutcome::Declined,
                        Some("approved") => ApprovalOutcome::Approved,
                        _ => ApprovalOutcome::Cancelled,
                    };
                    return Some(Answer::SettledThere(id, outcome));
                }
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
    /// The child asks for an approval.
    Ask(ChildApproval),
    /// The child settled an approval it had asked for before an answer came.
    SettledThere(String, ApprovalOutcome),
    Done,
}

impl Report {
    /// The answer to the child's approval `id` goes down: it is no longer awaited, and a
    /// decline is listed in the result.
    fn answered(&mut self, id: &str, approved: bool) {
        if let Some(summary) = self.asked.remove(id) {
            if !approved {
                self.declined.push(summary);
            }
        }
    }
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
    link: Option<Link>,
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
    let (call_id, inputs, mut answers) = match link {
        Some(l) => {
            cmd.env(MODE_ENV, l.mode.as_str());
            (l.call_id, Some(l.inputs), Some(l.answers))
        }
        None => (String::new(), None, None),
    };
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
            Some((id, approved)) = recv(&mut answers) => {
                report.answered(&id, approved);
                send(&mut stdin, json!({"cmd": "approve", "approval_id": id, "approved": approved})).await;
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
                        Some(Answer::Ask(mut request)) => match &inputs {
                            Some(tx) => {
                                request.description = a.description.clone();
                                let _ = tx.send(Input::TaskApproval {
                                    call_id: call_id.clone(),
                                    request: Box::new(request),
                                });
                            }
                            None => {
                                report.answered(&request.approval_id, false);
                                send(&mut stdin, json!({"cmd": "approve", "approval_id": request.approval_id, "approved": false})).await;
                            }
                        },
                        Some(Answer::SettledThere(approval_id, outcome)) => {
                            if let Some(tx) = &inputs {
                                let _ = tx.send(Input::TaskApprovalSettled {
                                    call_id: call_id.clone(),
                                    approval_id,
                                    outcome,
                                });
                            }
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

/// The next answer of the core, or never when there is no link (or it closed).
async fn recv(
    answers: &mut Option<tokio::sync::mpsc::UnboundedReceiver<(String, bool)>>,
) -> Option<(String, bool)> {
    match answers {
        Some(rx) => match rx.recv().await {
            Some(a) => Some(a),
            None => {
                *answers = None;
                std::future::pending().await
            }
        },
        None => std::future::pending().await,
    }
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

    #[test]
    fn a_childs_approval_request_goes_up_whole_and_a_decline_is_listed() {
        let mut r = Report::default();
        let Some(Answer::Ask(req)) = r.event(&json!({
            "session_id": "c1", "type": "approval_request", "approval_id": "a1",
            "name": "deploy", "summary": "deploy it", "detail": "d",
            "reason": "unapproved_source", "source_path": ".openmax/tools/deploy.json",
            "source_sha": "0123456789ab", "env": ["DEPLOY_TOKEN"]
        })) else {
            panic!("not asked")
        };
        assert_eq!(
            (
                req.approval_id.as_str(),
                req.name.as_str(),
                req.summary.as_str()
            ),
            ("a1", "deploy", "deploy it")
        );
        assert_eq!(req.reason, ApprovalReason::UnapprovedSource);
        assert_eq!(
            (req.source_path.as_str(), req.source_sha.as_str()),
            (".openmax/tools/deploy.json", "0123456789ab")
        );
        assert_eq!(req.env, ["DEPLOY_TOKEN"]);
        r.answered("a1", false);
        // Answered: the child's own settling of it is not reported up again.
        assert!(r
            .event(&json!({"session_id":"c1","type":"approval_settled","approval_id":"a1","outcome":"declined"}))
            .is_none());
        // One the child settles itself first (its timeout) is.
        assert!(r.event(&json!({"session_id":"c1","type":"approval_request","approval_id":"a2","name":"write_file","summary":"write b","detail":"","reason":"gate","source_path":"","source_sha":""})).is_some());
        assert!(matches!(
            r.event(&json!({"session_id":"c1","type":"approval_settled","approval_id":"a2","outcome":"timed_out"})),
            Some(Answer::SettledThere(id, ApprovalOutcome::TimedOut)) if id == "a2"
        ));
        r.stop_reason = Some("end_turn".into());
        assert!(r.render("ship").contains("\ndeclined: deploy it\n"));
    }
}
