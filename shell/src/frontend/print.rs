//! `-p PROMPT`: one turn through the same core and runtime, rendered for a terminal or a
//! script. Reply text streams to stdout as it arrives (a newline at the end); everything else
//! (tool starts and ends, diffs, retries, notes, declined approvals, errors) goes to stderr, one
//! line each where it fits.
//!
//! Exit codes ([`PrintSink::exit_code`]): 0 for a normal end; 1 when the turn ended `error`,
//! `truncated` (the reply is incomplete), `refused` (nothing ran, e.g. an untrusted project),
//! `blocked` or `cancelled`; 4 for `max_iterations`, `budget_exhausted` and `unverified`.
//!
//! Invariant: stdout carries only the model's reply text, so `openmax -p … > file` captures
//! exactly the answer.

use std::collections::BTreeMap;
use std::io::Write;

use openmax_core::wire::{ApprovalOutcome, ApprovalReason, Event, StopReason};

use super::Sink;

/// The `-p` renderer.
pub struct PrintSink<O: Write, E: Write> {
    out: O,
    err: E,
    out_buf: Vec<u8>,
    /// The last byte written to stdout was a newline (or nothing was written).
    out_at_line_start: bool,
    thinking_open: bool,
    pending: BTreeMap<String, (String, String, ApprovalReason, String)>,
    stop_reason: Option<StopReason>,
}

impl<O: Write, E: Write> PrintSink<O, E> {
    pub fn new(out: O, err: E) -> PrintSink<O, E> {
        PrintSink {
            out,
            err,
            out_buf: Vec::new(),
            out_at_line_start: true,
            thinking_open: false,
            pending: BTreeMap::new(),
            stop_reason: None,
        }
    }

    /// The exit code, once the turn's `done` was seen.
    pub fn exit_code(&self) -> Option<i32> {
        self.stop_reason.as_ref().map(StopReason::print_exit_code)
    }

    /// The writers (tests).
    pub fn into_inner(self) -> (O, E) {
        (self.out, self.err)
    }

    fn note(&mut self, line: &str) {
        self.end_thinking();
        // Keep stdout and stderr in a readable order on a shared terminal.
        self.flush_out();
        let _ = writeln!(self.err, "{line}");
    }

    fn end_thinking(&mut self) {
        if self.thinking_open {
            self.thinking_open = false;
            let _ = writeln!(self.err);
        }
    }

    fn flush_out(&mut self) {
        if !self.out_buf.is_empty() {
            let _ = self.out.write_all(&self.out_buf);
            self.out_buf.clear();
        }
        let _ = self.out.flush();
    }
}

fn one_line(s: &str, max: usize) -> String {
    let flat: String = s
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    match flat.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &flat[..cut]),
        None => flat,
    }
}

impl<O: Write, E: Write> Sink for PrintSink<O, E> {
    fn event(&mut self, event: Event) {
        match event {
            Event::Token { text } => {
                self.end_thinking();
                if let Some(&last) = text.as_bytes().last() {
                    self.out_at_line_start = last == b'\n';
                }
                self.out_buf.extend_from_slice(text.as_bytes());
            }
            Event::Thinking { text } => {
                if !self.thinking_open {
                    self.flush_out();
                    let _ = write!(self.err, "thinking: ");
                    self.thinking_open = true;
                }
                let _ = write!(self.err, "{text}");
            }
            Event::MessageDone { .. } => {
                if !self.out_at_line_start {
                    self.out_buf.push(b'\n');
                    self.out_at_line_start = true;
                }
            }
            Event::ToolStart { name, args, .. } => {
                let args = serde_json::Value::Object(args).to_string();
                self.note(&format!("→ {name} {}", one_line(&args, 200)));
            }
            Event::ToolEnd { ok, output, .. } => {
                let first = output.lines().next().unwrap_or("");
                let lines = output.lines().count();
                let line = if ok {
                    format!("  ok ({lines} line{})", if lines == 1 { "" } else { "s" })
                } else {
                    format!("  failed: {}", one_line(first, 200))
                };
                self.note(&line);
            }
            Event::Diff {
                path,
                diff,
                added,
                removed,
                ..
            } => {
                self.note(&format!("  diff {path} (+{added} -{removed})"));
                let _ = write!(self.err, "{diff}");
                if !diff.ends_with('\n') {
                    let _ = writeln!(self.err);
                }
            }
            Event::Retry {
                attempt,
                max_attempts,
                reason,
            } => self.note(&format!(
                "retrying (attempt {attempt} of {max_attempts}): {}",
                one_line(&reason, 200)
            )),
            Event::HarnessNote { text, .. } => {
                self.note(&format!("note: {}", one_line(&text, 300)))
            }
            Event::ApprovalRequest {
                approval_id,
                name,
                summary,
                reason,
                source_path,
                ..
            } => {
                self.pending
                    .insert(approval_id, (name, summary, reason, source_path));
            }
            Event::ApprovalSettled {
                approval_id,
                outcome,
            } => {
                if let Some((name, summary, reason, source_path)) =
                    self.pending.remove(&approval_id)
                {
                    if outcome != ApprovalOutcome::Approved {
                        let what = if summary.is_empty() { name } else { summary };
                        let line = match reason {
                            ApprovalReason::UnapprovedSource => format!(
                                "declined: {what} (its source {source_path} has no human \
                                 approval; to approve it, run: openmax --approve {source_path})"
                            ),
                            ApprovalReason::Gate => format!(
                                "declined: {what} (-p cannot ask for approval; set the \
                                 project's mode to auto over --stdio with approval_mode to \
                                 let such calls run)"
                            ),
                        };
                        self.note(&line);
                    }
                }
            }
            Event::Compacted {
                tokens_before,
                tokens_after,
                ..
            } => self.note(&format!(
                "compacted the context: {tokens_before} → {tokens_after} tokens"
            )),
            Event::SchemasOverBudget {
                schema_tokens,
                budget_tokens,
            } => self.note(&format!(
                "warning: tool schemas take {schema_tokens} of {budget_tokens} usable tokens"
            )),
            Event::HookFailed {
                hook,
                event,
                detail,
            } => self.note(&format!(
                "hook {hook} ({event}) failed: {}",
                one_line(&detail, 200)
            )),
            Event::TurnRefused { hook, reason, .. } => self.note(&format!(
                "hook {hook} refused the reply: {}",
                one_line(&reason, 200)
            )),
            Event::Error { message } | Event::ProtocolError { message } => {
                self.note(&format!("error: {message}"))
            }
            Event::Done { stop_reason } => {
                if !self.out_at_line_start {
                    self.out_buf.push(b'\n');
                    self.out_at_line_start = true;
                }
                if stop_reason.print_exit_code() != 0 || stop_reason.as_str() == "length" {
                    self.note(&format!("openmax: turn ended: {stop_reason}"));
                }
                self.stop_reason = Some(stop_reason);
            }
            Event::Budget { .. }
            | Event::Usage { .. }
            | Event::Refrozen { .. }
            | Event::ApprovalMode { .. } => {}
        }
    }

    fn flush(&mut self) {
        self.flush_out();
        let _ = self.err.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reply_on_stdout_notices_on_stderr() {
        let mut s = PrintSink::new(Vec::new(), Vec::new());
        s.event(Event::Token { text: "Hel".into() });
        s.event(Event::Token { text: "lo".into() });
        s.event(Event::ApprovalRequest {
            approval_id: "a1".into(),
            name: "lint".into(),
            summary: "run lint".into(),
            detail: String::new(),
            reason: ApprovalReason::UnapprovedSource,
            source_path: ".openmax/tools/lint.json".into(),
            source_sha: "abc".into(),
            env: vec![],
        });
        s.event(Event::ApprovalSettled {
            approval_id: "a1".into(),
            outcome: ApprovalOutcome::Declined,
        });
        s.event(Event::MessageDone {
            text: "Hello".into(),
        });
        s.event(Event::Done {
            stop_reason: "max_iterations".into(),
        });
        s.flush();
        assert_eq!(s.exit_code(), Some(4));
        let (out, err) = s.into_inner();
        assert_eq!(String::from_utf8(out).unwrap(), "Hello\n");
        let err = String::from_utf8(err).unwrap();
        assert!(
            err.contains("openmax --approve .openmax/tools/lint.json"),
            "{err}"
        );
    }
}
