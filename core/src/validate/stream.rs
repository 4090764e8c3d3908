//! The stream validator: the rules a stdout stream must keep across lines.
//!
//! [`StreamValidator::feed`] takes one line (bytes, no newline) and reports it;
//! [`StreamValidator::finish`] reports what only the end of the stream shows. Each rule below is
//! written next to the contract sentence it comes from.
//!
//! **What a turn is, seen from the stream alone.** The stream does not show commands, so a turn
//! is the stretch of lines up to and including a `done`. It *opens* at its first turn line:
//! `token`, `thinking`, `message_done`, `budget`, `usage`, `tool_start`, `tool_end`, `diff`,
//! `retry`, `approval_request`, `approval_settled`, `turn_refused` or `error`. The other lines
//! are *neutral*: they may appear between turns as well as inside one (`protocol_error`, the
//! `approval_mode` acknowledgement, `harness_note`, `hook_failed`, `compacted`,
//! `schemas_over_budget`), except `refrozen`, which only appears between turns. A `done` may
//! close a turn that never opened (a refused, blocked or budget-exhausted command sends nothing
//! else).
//!
//! **What a request is.** A model request is the stretch of a turn between request boundaries:
//! `message_done` (the reply completed), `tool_start`/`tool_end` (the reply's calls run; the
//! next request carries their results) and `done`. Retry numbering and the
//! no-token-before-a-retry rule are per request.
//!
//! Invariants: memory is bounded. The validator keeps the hello's session id, small counters,
//! and the sets of *open* call ids and *pending* approval ids; each set is capped at
//! [`MAX_OPEN_IDS`] (past the cap it reports a violation and stops tracking new ids), and ids
//! longer than 64 bytes are stored as their sha256. The hot path for plain `token`,
//! `thinking` and `message_done` lines allocates nothing.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use super::line::{check_line, Parsed};
use super::{LineReport, Violation, Where};
use crate::wire::event::Event;
use crate::wire::StopReason;

/// The most open tool calls, or pending approvals, the validator tracks at once.
pub const MAX_OPEN_IDS: usize = 65_536;

/// Validates one stdout stream, line by line. See the module doc for the rules.
#[derive(Debug, Default)]
pub struct StreamValidator {
    /// Lines fed so far (the current line's number once `feed` starts).
    line: u64,
    /// The hello's session id, or the first session id seen when there was no hello.
    session_id: Option<String>,
    /// `{"session_id":<id>,"type":"` for the text-line fast path.
    session_prefix: Vec<u8>,
    /// Line 1 was a hello with `continued: true`.
    continued: bool,
    /// The previous line's type, when it was well formed.
    prev_type: Option<&'static str>,
    turn: Turn,
    /// Pending approvals: id key → (line of the request, id as written, capped at 64 bytes).
    approvals: BTreeMap<String, (u64, String)>,
    /// Line of the one `schemas_over_budget`.
    schemas_over_budget: Option<u64>,
    /// Cap warnings already given (once each).
    calls_capped: bool,
    approvals_capped: bool,
    violations: u64,
    bad_lines: u64,
}

/// The state of the turn in progress (reset by every `done`).
#[derive(Debug, Default)]
struct Turn {
    /// Line of the first turn line since the last `done`.
    opened_at: Option<u64>,
    run: TokenRun,
    /// Line of the first `error` in this turn.
    error_at: Option<u64>,
    /// A `message_done` has been seen in this turn.
    message_done: bool,
    /// Line of the `message_done` that ended the current model reply; cleared when the next
    /// request can start (`tool_start`, `tool_end`, `turn_refused`).
    reply_done_at: Option<u64>,
    request: Request,
    /// Open tool calls: id key → (line of the tool_start, id as written, capped).
    calls: BTreeMap<String, (u64, String)>,
    /// Call ids started in this turn (for `harness_note`), capped like `calls`.
    started: BTreeMap<String, ()>,
    /// The last `turn_refused` (continuation, continuations_left, line).
    refused: Option<(u32, u32, u64)>,
}

/// A run of `token` lines and how it ended.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum TokenRun {
    /// No run open.
    #[default]
    None,
    /// Tokens streamed since line `from`, not yet ended by `message_done`.
    Streaming { from: u64 },
}

/// The model request in progress.
#[derive(Debug, Default, Clone, Copy)]
struct Request {
    /// Line of the first token of this request.
    token_at: Option<u64>,
    /// The last retry of this request: (attempt, max_attempts).
    last_retry: Option<(u64, u64)>,
}

impl StreamValidator {
    /// A validator before the first line.
    pub fn new() -> StreamValidator {
        StreamValidator::default()
    }

    /// Check one line (without its newline) and apply it to the stream state.
    pub fn feed(&mut self, raw: &[u8]) -> LineReport {
        self.line += 1;
        let n = self.line;
        let mut out = Vec::new();
        let text = match std::str::from_utf8(raw) {
            Ok(t) => t,
            Err(e) => {
                out.push(format!(
                    "not valid UTF-8 (invalid byte at offset {})",
                    e.valid_up_to()
                ));
                self.prev_type = None;
                return self.report(n, out);
            }
        };
        // Line 2 of a continued session must be the transcript: leave it to the full check.
        if !(n == 2 && self.continued) {
            if let Some(kind) = self.plain_text_line(raw) {
                // The text itself plays no part in any stream rule.
                let event = match kind {
                    "token" => Event::Token {
                        text: String::new(),
                    },
                    "thinking" => Event::Thinking {
                        text: String::new(),
                    },
                    _ => Event::MessageDone {
                        text: String::new(),
                    },
                };
                self.apply_event(n, &event, &mut out);
                self.prev_type = Some(event.type_name());
                return self.report(n, out);
            }
        }
        match check_line(text) {
            Ok(parsed) => {
                self.apply(n, &parsed, &mut out);
                self.prev_type = Some(parsed.type_name());
            }
            Err(problems) => {
                out = problems;
                self.prev_type = None;
            }
        }
        self.report(n, out)
    }

    /// Count a line the caller could not hand over (too long, unreadable) and report it.
    pub fn feed_unreadable(&mut self, message: &str) -> LineReport {
        self.line += 1;
        self.prev_type = None;
        let n = self.line;
        self.report(n, vec![message.to_string()])
    }

    /// The end-of-stream rules. Call once, after the last line.
    pub fn finish(&mut self) -> Vec<Violation> {
        let mut out = Vec::new();
        if self.line == 0 {
            // Contract: "The first stdout line is: {"type":"hello",...}".
            out.push("empty stream: there is no hello line (the first line must be hello)".into());
        }
        if self.continued && self.line == 1 {
            // Contract: continued ... "the next line is then one transcript object".
            out.push(
                "hello said continued: true but the stream ended before the transcript line".into(),
            );
        }
        self.close_turn_checks("the stream ended", &mut out);
        if let Some(at) = self.turn.opened_at {
            // Contract: "Every user command is answered by exactly one done, and done is the
            // only guaranteed terminator."
            out.push(format!(
                "the turn that began at line {at} has no done (done is the only guaranteed terminator)"
            ));
        }
        self.violations += out.len() as u64;
        out.into_iter()
            .map(|message| Violation {
                at: Where::End,
                message,
            })
            .collect()
    }

    /// Lines fed so far.
    pub fn lines(&self) -> u64 {
        self.line
    }

    /// Violations reported so far (line and end-of-stream).
    pub fn violation_count(&self) -> u64 {
        self.violations
    }

    /// Lines that had at least one violation.
    pub fn bad_lines(&self) -> u64 {
        self.bad_lines
    }

    fn report(&mut self, n: u64, messages: Vec<String>) -> LineReport {
        if !messages.is_empty() {
            self.bad_lines += 1;
            self.violations += messages.len() as u64;
        }
        LineReport {
            line: n,
            violations: messages
                .into_iter()
                .map(|message| Violation {
                    at: Where::Line(n),
                    message,
                })
                .collect(),
        }
    }

    /// The hot path: exactly `{"session_id":<hello's>,"type":T,"text":"…"}` for T one of
    /// `token`, `thinking`, `message_done`, with a text free of `\u` escapes and control bytes;
    /// returns T. Anything else takes the full parse, which reaches the same verdict for the
    /// lines this accepts (a property test holds the two together).
    fn plain_text_line(&self, raw: &[u8]) -> Option<&'static str> {
        if self.session_prefix.is_empty() {
            return None;
        }
        let rest = raw.strip_prefix(self.session_prefix.as_slice())?;
        let (kind, body) = [
            ("token", &b"token\",\"text\":\""[..]),
            ("thinking", b"thinking\",\"text\":\""),
            ("message_done", b"message_done\",\"text\":\""),
        ]
        .into_iter()
        .find_map(|(kind, head)| rest.strip_prefix(head).map(|body| (kind, body)))?;
        let mut i = 0;
        while i < body.len() {
            match body[i] {
                b'"' => return (&body[i + 1..] == b"}").then_some(kind),
                b'\\' => match body.get(i + 1) {
                    Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => i += 2,
                    _ => return None,
                },
                0..=0x1f => return None,
                _ => i += 1,
            }
        }
        None
    }

    fn set_session(&mut self, id: &str) {
        self.session_id = Some(id.to_string());
        let mut p = b"{\"session_id\":".to_vec();
        // Serializing a &str into a Vec cannot fail.
        serde_json::to_writer(&mut p, id).expect("string serializes");
        p.extend_from_slice(b",\"type\":\"");
        self.session_prefix = p;
    }

    fn apply(&mut self, n: u64, parsed: &Parsed, out: &mut Vec<String>) {
        // Contract: "The first stdout line is: {"type":"hello",...}".
        match (n, parsed) {
            (1, Parsed::Hello { .. }) => {}
            (1, other) => out.push(format!(
                "the first line must be hello, found {}",
                other.type_name()
            )),
            (_, Parsed::Hello { .. }) => out.push("hello may appear only as the first line".into()),
            _ => {}
        }
        // Contract: "continued is true when --continue resumed a prior session; the next line
        // is then one transcript object".
        if n == 2 && self.continued && !matches!(parsed, Parsed::Transcript { .. }) {
            out.push(format!(
                "hello said continued: true, so line 2 must be transcript, found {}",
                parsed.type_name()
            ));
        }
        match parsed {
            Parsed::Hello {
                session_id,
                continued,
            } => {
                if n == 1 {
                    self.set_session(session_id);
                    self.continued = *continued;
                }
            }
            Parsed::Transcript { session_id } => {
                if n != 2 {
                    out.push("transcript may appear only as the second line".into());
                } else if !self.continued {
                    out.push("transcript appears but hello said continued: false".into());
                }
                self.check_session(Some(session_id), out);
            }
            Parsed::Event { session_id, event } => {
                self.check_session(session_id.as_ref(), out);
                self.apply_event(n, event, out);
            }
        }
    }

    /// Contract: "Every event line carries the flattened session_id" — the hello's.
    fn check_session(&mut self, id: Option<&String>, out: &mut Vec<String>) {
        let Some(id) = id else { return };
        match &self.session_id {
            Some(hello) if hello != id => out.push(format!(
                "session_id {:?} differs from the hello's {:?}",
                clip(id),
                clip(hello)
            )),
            Some(_) => {}
            None => self.set_session(id),
        }
    }

    fn open_turn(&mut self, n: u64) {
        self.turn.opened_at.get_or_insert(n);
    }

    /// Contract: "a turn that hits a provider-stream error ... emits an error line and then
    /// done"; "A turn that dies unexpectedly reports error and then done". After an error the
    /// turn produces no more model output.
    fn after_error(&self, what: &str, out: &mut Vec<String>) {
        if let Some(at) = self.turn.error_at {
            out.push(format!(
                "{what} after the error at line {at}: an error ends the turn's model output, only done may follow"
            ));
        }
    }

    fn on_token(&mut self, n: u64, out: &mut Vec<String>) {
        self.open_turn(n);
        if self.turn.error_at.is_some() {
            self.after_error("token", out);
        }
        if self.turn.run == TokenRun::None {
            self.turn.run = TokenRun::Streaming { from: n };
        }
        if self.turn.request.token_at.is_none() {
            self.turn.request.token_at = Some(n);
        }
    }

    /// A request boundary: the next model request starts fresh.
    fn end_request(&mut self) {
        self.turn.request = Request::default();
    }

    fn apply_event(&mut self, n: u64, event: &Event, out: &mut Vec<String>) {
        match event {
            Event::Token { .. } => self.on_token(n, out),
            Event::Thinking { .. } => {
                self.open_turn(n);
                self.after_error("thinking", out);
            }
            Event::MessageDone { .. } => {
                self.open_turn(n);
                self.after_error("message_done", out);
                // Contract: "On a normal turn a run of token deltas is terminated by one
                // message_done": one per model reply, and a new reply needs a new request.
                if let Some(at) = self.turn.reply_done_at {
                    out.push(format!(
                        "a second message_done for one model reply (the first at line {at}); a reply ends with one message_done"
                    ));
                }
                self.turn.reply_done_at = Some(n);
                self.turn.run = TokenRun::None;
                self.turn.message_done = true;
                self.end_request();
            }
            Event::Budget { .. } | Event::Usage { .. } => self.open_turn(n),
            Event::ToolStart { call_id, .. } => {
                self.open_turn(n);
                self.after_error("tool_start", out);
                self.end_request();
                self.turn.reply_done_at = None;
                let key = id_key(call_id);
                if self.turn.calls.contains_key(&key) {
                    out.push(format!(
                        "tool_start opens call_id {:?}, which is already open",
                        clip(call_id)
                    ));
                } else if self.turn.calls.len() >= MAX_OPEN_IDS {
                    if !self.calls_capped {
                        self.calls_capped = true;
                        out.push(format!(
                            "more than {MAX_OPEN_IDS} tool calls open at once; the validator stops tracking new ones"
                        ));
                    }
                } else {
                    self.turn.calls.insert(key.clone(), (n, clip(call_id)));
                }
                if self.turn.started.len() < MAX_OPEN_IDS {
                    self.turn.started.insert(key, ());
                }
            }
            Event::ToolEnd { call_id, .. } => {
                self.open_turn(n);
                self.end_request();
                self.turn.reply_done_at = None;
                // Contract (tool_end: call_id): it ends the call a tool_start opened.
                if self.turn.calls.remove(&id_key(call_id)).is_none() && !self.calls_capped {
                    out.push(format!(
                        "tool_end names call_id {:?} that no tool_start opened (or that already ended)",
                        clip(call_id)
                    ));
                }
            }
            Event::Diff { call_id, .. } => {
                self.open_turn(n);
                // A diff belongs to a running call.
                if !self.turn.calls.contains_key(&id_key(call_id)) && !self.calls_capped {
                    out.push(format!(
                        "diff names call_id {:?} that is not an open tool call",
                        clip(call_id)
                    ));
                }
            }
            Event::HarnessNote { call_id, .. } => {
                // Contract: "call_id links it to the tool result it rode; it is empty for a note
                // inserted before the next prompt".
                if !call_id.is_empty()
                    && !self.turn.started.contains_key(&id_key(call_id))
                    && self.turn.started.len() < MAX_OPEN_IDS
                {
                    out.push(format!(
                        "harness_note names call_id {:?} that no tool_start of this turn opened",
                        clip(call_id)
                    ));
                }
            }
            Event::Retry {
                attempt,
                max_attempts,
                ..
            } => {
                self.open_turn(n);
                self.after_error("retry", out);
                let (attempt, max) = (u64::from(*attempt), u64::from(*max_attempts));
                // Contract: "no token line precedes a retried stream".
                if let Some(at) = self.turn.request.token_at {
                    out.push(format!(
                        "retry after token lines of the same request (from line {at}): no token line precedes a retried stream"
                    ));
                }
                // Contract: "attempt is the one that goes out of the max_attempts budget":
                // attempts of one request count up against one budget.
                if let Some((prev, prev_max)) = self.turn.request.last_retry {
                    if attempt <= prev {
                        out.push(format!(
                            "retry.attempt {attempt} does not increase on the previous retry's {prev} within the same request"
                        ));
                    }
                    if max != prev_max {
                        out.push(format!(
                            "retry.max_attempts {max} differs from {prev_max} earlier in the same request"
                        ));
                    }
                }
                self.turn.request.last_retry = Some((attempt, max));
            }
            Event::ApprovalRequest { approval_id, .. } => {
                self.open_turn(n);
                let key = id_key(approval_id);
                if self.approvals.contains_key(&key) {
                    out.push(format!(
                        "approval_request reuses approval_id {:?}, which is still pending",
                        clip(approval_id)
                    ));
                } else if self.approvals.len() >= MAX_OPEN_IDS {
                    if !self.approvals_capped {
                        self.approvals_capped = true;
                        out.push(format!(
                            "more than {MAX_OPEN_IDS} approvals pending at once; the validator stops tracking new ones"
                        ));
                    }
                } else {
                    self.approvals.insert(key, (n, clip(approval_id)));
                }
            }
            Event::ApprovalSettled { approval_id, .. } => {
                self.open_turn(n);
                // Contract: approval_settled answers an approval_request; an id settles once.
                if self.approvals.remove(&id_key(approval_id)).is_none() && !self.approvals_capped {
                    out.push(format!(
                        "approval_settled names approval_id {:?} that no approval_request issued (or that already settled)",
                        clip(approval_id)
                    ));
                }
            }
            Event::Refrozen { .. } => {
                // Contract: reload is "answered by refrozen, or protocol_error while a turn is in
                // flight" — so refrozen never appears inside a turn.
                if let Some(at) = self.turn.opened_at {
                    out.push(format!(
                        "refrozen inside the turn that began at line {at}: a reload while a turn is in flight is answered by protocol_error"
                    ));
                }
            }
            Event::SchemasOverBudget { .. } => {
                // Contract: "Advisory, at most once per session".
                if let Some(at) = self.schemas_over_budget {
                    out.push(format!(
                        "schemas_over_budget again (first at line {at}); it is sent at most once per session"
                    ));
                } else {
                    self.schemas_over_budget = Some(n);
                }
            }
            Event::Compacted { .. } | Event::HookFailed { .. } => {}
            Event::TurnRefused {
                continuation,
                continuations_left,
                ..
            } => {
                self.open_turn(n);
                // Contract: "turn_refused means the turn continues after a message_done".
                if !self.turn.message_done {
                    out.push("turn_refused with no message_done before it in this turn".into());
                }
                // Contract: continuation counts "refusals honored before this one" and
                // continuations_left "how many the harness had left": one counts up, the other
                // down, within a turn.
                if let Some((prev_c, prev_left, at)) = self.turn.refused {
                    if *continuations_left >= prev_left {
                        out.push(format!(
                            "turn_refused.continuations_left {continuations_left} does not count down from {prev_left} (line {at})"
                        ));
                    }
                    if *continuation <= prev_c {
                        out.push(format!(
                            "turn_refused.continuation {continuation} does not count up from {prev_c} (line {at})"
                        ));
                    }
                }
                self.turn.refused = Some((*continuation, *continuations_left, n));
                self.turn.message_done = false;
                self.turn.reply_done_at = None;
                self.end_request();
            }
            Event::Error { .. } => {
                self.open_turn(n);
                self.turn.error_at.get_or_insert(n);
            }
            Event::Done { stop_reason } => self.on_done(stop_reason, out),
            Event::ProtocolError { .. } | Event::ApprovalMode { .. } => {}
        }
    }

    fn on_done(&mut self, stop_reason: &StopReason, out: &mut Vec<String>) {
        match stop_reason {
            // Contract: "Empty text, or a project that is not trusted, yields
            // {"type":"protocol_error",...} followed by done with stop_reason refused";
            // "refused: The command started no turn; a protocol_error precedes it".
            StopReason::Refused => {
                if self.prev_type != Some("protocol_error") {
                    out.push(
                        "done with stop_reason refused must directly follow its protocol_error"
                            .into(),
                    );
                }
                if let Some(at) = self.turn.opened_at {
                    out.push(format!(
                        "done refused ends the turn that began at line {at}, but a refused command starts no turn"
                    ));
                }
            }
            // Contract: "error: The turn failed; an error line precedes it"; "truncated: ...
            // an error line precedes it".
            StopReason::Error | StopReason::Truncated if self.turn.error_at.is_none() => {
                out.push(format!(
                    "done with stop_reason {stop_reason} has no error line before it in this turn"
                ));
            }
            _ => {}
        }
        // Contract: "a run of token deltas is terminated by one message_done, but a turn that
        // hits a provider-stream error ... emits an error line and then done with no
        // message_done".
        if let TokenRun::Streaming { from } = self.turn.run {
            if self.turn.error_at.is_none() {
                out.push(format!(
                    "the token run from line {from} was not ended by message_done before done"
                ));
            }
        }
        self.close_turn_checks("its turn's done", out);
        self.turn = Turn::default();
    }

    /// Calls and approvals that must close before a turn ends (or the stream does).
    fn close_turn_checks(&mut self, when: &str, out: &mut Vec<String>) {
        // Every tool_start is ended before its turn's done.
        for (at, id) in self.turn.calls.values() {
            out.push(format!(
                "tool_start at line {at} (call_id {id:?}) was not ended by tool_end before {when}"
            ));
        }
        self.turn.calls.clear();
        // An approval belongs to the turn whose tool call raised it: "A request emitted while
        // in ask remains pending until answered or cancelled", and the turn waits on it, so it
        // settles before the turn's done ("after quit or EOF, pending ... approvals are
        // declined").
        for (at, id) in self.approvals.values() {
            out.push(format!(
                "approval_request at line {at} (approval_id {id:?}) was not settled before {when}"
            ));
        }
        self.approvals.clear();
    }
}

/// The key an id is tracked under: itself up to 64 bytes, else its sha256.
fn id_key(id: &str) -> String {
    if id.len() <= 64 {
        id.to_string()
    } else {
        let digest = Sha256::digest(id.as_bytes());
        let mut s = String::from("sha256:");
        for b in digest {
            s.push_str(&format!("{b:02x}"));
        }
        s
    }
}

/// An id or session id clipped to 64 bytes (on a char boundary) for messages.
fn clip(s: &str) -> String {
    if s.len() <= 64 {
        return s.to_string();
    }
    let mut end = 64;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use quickcheck::{QuickCheck, TestResult};

    const HELLO: &[u8] = br#"{"type":"hello","proto":"openmax-stdio/6","protocol_version":6,"session_id":"s1","version":"0.2.0","project":"/p","continued":false}"#;

    fn after_hello() -> StreamValidator {
        let mut v = StreamValidator::new();
        assert!(v.feed(HELLO).is_ok());
        v
    }

    /// Whatever the fast path accepts, the full check accepts as the same line type.
    fn fast_path_agrees(raw: &[u8]) -> bool {
        let v = after_hello();
        let Some(kind) = v.plain_text_line(raw) else {
            return true;
        };
        let Ok(text) = std::str::from_utf8(raw) else {
            return true; // feed rejects non-UTF-8 before the fast path
        };
        matches!(
            check_line(text),
            Ok(Parsed::Event { session_id: Some(ref s), ref event }) if s == "s1" && event.type_name() == kind
        )
    }

    #[test]
    fn the_fast_path_accepts_only_what_the_full_check_accepts() {
        fn prop(text: String, raw_tail: Vec<u8>, kind: u8) -> TestResult {
            let kind = ["token", "thinking", "message_done"][kind as usize % 3];
            let good = format!(
                r#"{{"session_id":"s1","type":"{kind}","text":{}}}"#,
                serde_json::to_string(&text).expect("string serializes")
            );
            let mut raw = format!(r#"{{"session_id":"s1","type":"{kind}","text":""#).into_bytes();
            raw.extend_from_slice(&raw_tail);
            TestResult::from_bool(fast_path_agrees(good.as_bytes()) && fast_path_agrees(&raw))
        }
        QuickCheck::new()
            .tests(2000)
            .quickcheck(prop as fn(String, Vec<u8>, u8) -> TestResult);
        for tail in [
            &br#"a\"}"#[..],
            br#"a\\"}"#,
            br#"a\u0041"}"#,
            br#"a\x"}"#,
            br#"a"} "#,
            br#"a","x":1}"#,
            b"a\t\"}",
            br#"a\"#,
            br#"a"}}"#,
        ] {
            let mut raw = br#"{"session_id":"s1","type":"token","text":""#.to_vec();
            raw.extend_from_slice(tail);
            assert!(fast_path_agrees(&raw), "{}", String::from_utf8_lossy(&raw));
        }
    }

    /// Lines drawn from real shapes and then damaged: the validator reports, never panics.
    #[test]
    fn arbitrary_streams_never_panic_and_number_every_line() {
        const SHAPES: [&str; 12] = [
            r#"{"type":"hello","proto":"openmax-stdio/6","protocol_version":6,"session_id":"s1","version":"0.2.0","project":"/p","continued":true}"#,
            r#"{"type":"transcript","session_id":"s1","messages":[{"role":"user","content":"hi"}],"truncated":false}"#,
            r#"{"session_id":"s1","type":"token","text":"hi"}"#,
            r#"{"session_id":"s1","type":"message_done","text":"hi"}"#,
            r#"{"session_id":"s1","type":"tool_start","call_id":"c1","name":"n","args":{}}"#,
            r#"{"session_id":"s1","type":"tool_end","call_id":"c1","ok":true,"output":""}"#,
            r#"{"session_id":"s1","type":"retry","attempt":2,"max_attempts":3,"reason":"r"}"#,
            r#"{"session_id":"s1","type":"approval_request","approval_id":"a1","name":"n","summary":"","detail":"","reason":"gate","source_path":"","source_sha":""}"#,
            r#"{"session_id":"s1","type":"approval_settled","approval_id":"a1","outcome":"approved"}"#,
            r#"{"session_id":"s1","type":"error","message":"e"}"#,
            r#"{"type":"protocol_error","message":"x"}"#,
            r#"{"session_id":"s1","type":"done","stop_reason":"refused"}"#,
        ];
        fn prop(picks: Vec<(u8, u16, u8)>) -> bool {
            let mut v = StreamValidator::new();
            for (i, (shape, at, byte)) in picks.iter().enumerate() {
                let mut line = SHAPES[*shape as usize % SHAPES.len()].as_bytes().to_vec();
                if *byte % 3 == 0 {
                    let at = *at as usize % line.len();
                    line[at] = *byte;
                } else if *byte % 3 == 1 {
                    line.truncate(*at as usize % line.len());
                }
                let r = v.feed(&line);
                if r.line != i as u64 + 1
                    || r.violations.iter().any(|x| x.at != Where::Line(r.line))
                {
                    return false;
                }
            }
            let end = v.finish();
            end.iter().all(|x| x.at == Where::End)
        }
        QuickCheck::new()
            .tests(500)
            .quickcheck(prop as fn(Vec<(u8, u16, u8)>) -> bool);
    }

    #[test]
    fn the_fast_path_takes_plain_text_lines() {
        let v = after_hello();
        let plain = r#"{"session_id":"s1","type":"token","text":"a \"b\" \\ \n é"}"#;
        assert_eq!(v.plain_text_line(plain.as_bytes()), Some("token"));
        let thinking = r#"{"session_id":"s1","type":"thinking","text":"x"}"#;
        assert_eq!(v.plain_text_line(thinking.as_bytes()), Some("thinking"));
        let other = r#"{"session_id":"s2","type":"token","text":"a"}"#;
        assert_eq!(v.plain_text_line(other.as_bytes()), None);
        let extra = r#"{"session_id":"s1","type":"token","text":"a","x":1}"#;
        assert_eq!(v.plain_text_line(extra.as_bytes()), None);
    }

    #[test]
    fn open_ids_are_capped_with_one_violation() {
        let mut v = after_hello();
        let mut capped = 0;
        for i in 0..MAX_OPEN_IDS + 10 {
            let line = format!(
                r#"{{"session_id":"s1","type":"tool_start","call_id":"c{i}","name":"n","args":{{}}}}"#
            );
            let r = v.feed(line.as_bytes());
            capped += r
                .violations
                .iter()
                .filter(|x| x.message.contains("stops tracking"))
                .count();
        }
        assert_eq!(capped, 1);
        assert_eq!(v.turn.calls.len(), MAX_OPEN_IDS);
    }

    #[test]
    fn long_ids_are_stored_as_digests() {
        let long = "x".repeat(10_000);
        assert!(id_key(&long).starts_with("sha256:"));
        assert_eq!(id_key(&long).len(), "sha256:".len() + 64);
        assert_eq!(id_key("c1"), "c1");
        let mut v = after_hello();
        let start = format!(
            r#"{{"session_id":"s1","type":"tool_start","call_id":"{long}","name":"n","args":{{}}}}"#
        );
        let end = format!(
            r#"{{"session_id":"s1","type":"tool_end","call_id":"{long}","ok":true,"output":""}}"#
        );
        assert!(v.feed(start.as_bytes()).is_ok());
        assert!(v.feed(end.as_bytes()).is_ok());
    }
}
