//! `-p PROMPT`: one turn through the same core and runtime, rendered for a terminal or a
//! script. Reply text streams to stdout as it arrives (a newline at the end); everything else
//! (tool starts and ends, diffs, retries, notes, declined approvals, errors) goes to stderr, one
//! line each where it fits.
//!
//! The exit code is the core's (a non-interactive session exits after its turn's `done` with
//! [`openmax_core::wire::StopReason::print_exit_code`]); this sink only says on stderr why a turn that did not end
//! normally ended.
//!
//! Invariant: stdout carries only the model's reply text, so `openmax -p … > file` captures
//! exactly the answer; with [`PrintSink::hide_reply`] (`--output-format json`, or an
//! `--output-schema` run, which print their own stdout at the end) it carries nothing.

use std::collections::BTreeMap;
use std::io::Write;

use openmax_core::wire::{ApprovalOutcome, Event};

use super::tally::{declined_note, Declined};
use crate::run::Sink;
use crate::text::one_line;

/// The `-p` renderer.
pub struct PrintSink<O: Write, E: Write> {
    out: O,
    err: E,
    out_buf: Vec<u8>,
    /// The last byte written to stdout was a newline (or nothing was written).
    out_at_line_start: bool,
    thinking_open: bool,
    pending: BTreeMap<String, Declined>,
    /// Reply text goes to stdout (else it is dropped: the caller prints its own result).
    show_reply: bool,
    /// Calls started and not ended, by id: how their end line names them, and whether
    /// another call ran beside them (`task` calls of one reply), so their end line must say
    /// which call it is.
    open: BTreeMap<String, (String, bool)>,
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
            show_reply: true,
            open: BTreeMap::new(),
        }
    }

    /// Write no reply text to stdout; notices still go to stderr.
    pub fn hide_reply(mut self) -> PrintSink<O, E> {
        self.show_reply = false;
        self
    }

    /// The writers (tests).
    pub fn into_inner(self) -> (O, E) {
        (self.out, self.err)
    }

    /// One notice line on stderr, after the reply text so far.
    pub fn note(&mut self, line: &str) {
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

impl<O: Write, E: Write> Sink for PrintSink<O, E> {
    fn event(&mut self, event: Event) {
        match event {
            Event::Token { .. } | Event::MessageDone { .. } if !self.show_reply => {}
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
            Event::ToolStart {
                call_id,
                name,
                args,
            } => {
                let args = serde_json::Value::Object(args).to_string();
                let beside = !self.open.is_empty();
                for (_, b) in self.open.values_mut() {
                    *b = true;
                }
                self.open
                    .insert(call_id, (format!("{name} {}", one_line(&args, 60)), beside));
                self.note(&format!("→ {name} {}", one_line(&args, 200)));
            }
            Event::ToolEnd {
                call_id,
                ok,
                output,
            } => {
                let first = output.lines().next().unwrap_or("");
                let lines = output.lines().count();
                let what = if ok {
                    format!("ok ({lines} line{})", if lines == 1 { "" } else { "s" })
                } else {
                    format!("failed: {}", one_line(first, 200))
                };
                let line = match self.open.remove(&call_id) {
                    Some((call, true)) => format!("  {call}: {what}"),
                    Some((_, false)) | None => format!("  {what}"),
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
                self.pending.insert(
                    approval_id,
                    Declined {
                        name,
                        summary,
                        reason,
                        source_path,
                    },
                );
            }
            Event::ApprovalSettled {
                approval_id,
                outcome,
            } => {
                if let Some(d) = self.pending.remove(&approval_id) {
                    if outcome != ApprovalOutcome::Approved {
                        self.note(&declined_note(&d));
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
    use openmax_core::wire::ApprovalReason;

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
        let (out, err) = s.into_inner();
        assert_eq!(String::from_utf8(out).unwrap(), "Hello\n");
        let err = String::from_utf8(err).unwrap();
        assert!(
            err.contains("openmax --approve .openmax/tools/lint.json"),
            "{err}"
        );
    }

    #[test]
    fn the_end_of_a_call_that_ran_beside_another_names_it() {
        let mut s = PrintSink::new(Vec::new(), Vec::new());
        let start = |id: &str, name: &str, arg: &str| Event::ToolStart {
            call_id: id.into(),
            name: name.into(),
            args: serde_json::json!({"description": arg})
                .as_object()
                .cloned()
                .unwrap_or_default(),
        };
        let end = |id: &str, ok: bool, output: &str| Event::ToolEnd {
            call_id: id.into(),
            ok,
            output: output.into(),
        };
        s.event(start("r1", "read_file", "alone"));
        s.event(end("r1", true, "one line"));
        s.event(start("t1", "task", "first"));
        s.event(start("t2", "task", "second"));
        s.event(end("t2", false, "it broke"));
        s.event(end("t1", true, "a\nb"));
        s.flush();
        let (_, err) = s.into_inner();
        let err = String::from_utf8(err).unwrap();
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(
            lines,
            [
                r#"→ read_file {"description":"alone"}"#,
                "  ok (1 line)",
                r#"→ task {"description":"first"}"#,
                r#"→ task {"description":"second"}"#,
                r#"  task {"description":"second"}: failed: it broke"#,
                r#"  task {"description":"first"}: ok (2 lines)"#,
            ]
        );
    }
}
