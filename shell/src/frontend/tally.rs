//! What a `-p` run adds up from the core's events, whatever the output format: usage totals,
//! tool calls, turns, the last reply, the last stop reason and error, and every call declined
//! because nobody could answer its approval request. The `json` result and the exit code are
//! computed from it ([`super::print_run`]).
//!
//! A declined call is an `approval_request` settled `declined`: in `-p`, the core declines a
//! request at once because no human can answer it (`ask` mode's gate, or external code whose
//! bytes no human approved). Calls the policy refuses without asking (`readonly`, a deny rule,
//! an escalation no human can approve) raise no request and are not counted: nothing could
//! have let them run in this mode. [`declined_note`] is the one wording of the stderr line.

use std::collections::BTreeMap;

use openmax_core::usage::UsageTotals;
use openmax_core::wire::{ApprovalOutcome, ApprovalReason, Event, StopReason};

/// A call declined because nobody could answer its approval request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Declined {
    /// The tool's name.
    pub name: String,
    /// The request's one-line summary (may be empty).
    pub summary: String,
    pub reason: ApprovalReason,
    /// For `unapproved_source`: the file a human approves with `openmax --approve`.
    pub source_path: String,
}

/// The stderr line for a declined call: what it was and how to let such calls run.
pub fn declined_note(d: &Declined) -> String {
    let what = if d.summary.is_empty() {
        d.name.as_str()
    } else {
        d.summary.as_str()
    };
    match d.reason {
        ApprovalReason::UnapprovedSource => format!(
            "declined: {what} (tool {}: its source {} has no human approval; to approve it, \
             run: openmax --approve {})",
            d.name, d.source_path, d.source_path
        ),
        ApprovalReason::Gate => format!(
            "declined: {what} (tool {}: it needs approval and -p has no one to ask; rerun with \
             --mode auto to let such calls run)",
            d.name
        ),
    }
}

/// The figures of a run so far.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    pub usage: UsageTotals,
    /// `tool_start` events: every call the model made that the harness took up.
    pub tool_calls: u64,
    /// `done` events.
    pub turns: u32,
    /// The text of the last turn's last `message_done` ("" when that turn kept no reply).
    pub last_reply: String,
    /// The last turn's stop reason.
    pub stop_reason: Option<StopReason>,
    /// The last `error` or `protocol_error` message.
    pub last_error: Option<String>,
    pub declined: Vec<Declined>,
    /// What the session's subagents used (their own sessions' usage, not on this wire).
    pub children: crate::tasks::progress::Children,
    /// The current turn's last `message_done` text so far.
    reply_this_turn: Option<String>,
    /// Open approval requests by id.
    pending: BTreeMap<String, Declined>,
}

impl Tally {
    /// Count one event. Returns the declined call an `approval_settled` just settled, if so.
    pub fn observe(&mut self, event: &Event) -> Option<Declined> {
        if self.usage.observe(event) {
            return None;
        }
        match event {
            Event::ToolStart { .. } => self.tool_calls += 1,
            Event::MessageDone { text } => self.reply_this_turn = Some(text.clone()),
            Event::Error { message } | Event::ProtocolError { message } => {
                self.last_error = Some(message.clone())
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
                    approval_id.clone(),
                    Declined {
                        name: name.clone(),
                        summary: summary.clone(),
                        reason: *reason,
                        source_path: source_path.clone(),
                    },
                );
            }
            Event::ApprovalSettled {
                approval_id,
                outcome,
            } => {
                let d = self.pending.remove(approval_id)?;
                if *outcome == ApprovalOutcome::Declined {
                    self.declined.push(d.clone());
                    return Some(d);
                }
            }
            Event::Done { stop_reason } => {
                self.turns += 1;
                self.stop_reason = Some(stop_reason.clone());
                self.last_reply = self.reply_this_turn.take().unwrap_or_default();
            }
            _ => {}
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_calls_turns_usage_the_last_reply_and_declines() {
        let mut t = Tally::default();
        let evs = vec![
            Event::MessageDone {
                text: "first".into(),
            },
            Event::Usage {
                prompt_tokens: 10,
                completion_tokens: 2,
                cached_tokens: None,
            },
            Event::ToolStart {
                call_id: "c1".into(),
                name: "write_file".into(),
                args: Default::default(),
            },
            Event::ApprovalRequest {
                approval_id: "a1".into(),
                name: "write_file".into(),
                summary: "write n.txt".into(),
                detail: String::new(),
                reason: ApprovalReason::Gate,
                source_path: String::new(),
                source_sha: String::new(),
                env: vec![],
            },
            Event::ApprovalSettled {
                approval_id: "a1".into(),
                outcome: ApprovalOutcome::Declined,
            },
            Event::MessageDone {
                text: "second".into(),
            },
            Event::Usage {
                prompt_tokens: 20,
                completion_tokens: 3,
                cached_tokens: Some(5),
            },
            Event::Done {
                stop_reason: "end_turn".into(),
            },
        ];
        let mut settled = Vec::new();
        for e in &evs {
            settled.extend(t.observe(e));
        }
        assert_eq!(t.tool_calls, 1);
        assert_eq!(t.turns, 1);
        assert_eq!(t.last_reply, "second");
        assert_eq!((t.usage.prompt_tokens, t.usage.completion_tokens), (30, 5));
        assert_eq!(t.usage.cached_tokens, Some(5));
        assert_eq!(settled.len(), 1);
        let note = declined_note(&settled[0]);
        assert!(
            note.contains("write n.txt") && note.contains("--mode auto"),
            "{note}"
        );
        // A turn that kept no reply reports "".
        t.observe(&Event::Error {
            message: "boom".into(),
        });
        t.observe(&Event::Done {
            stop_reason: "error".into(),
        });
        assert_eq!(t.last_reply, "");
        assert_eq!(t.last_error.as_deref(), Some("boom"));
        assert_eq!(t.stop_reason, Some(StopReason::Error));
    }
}
