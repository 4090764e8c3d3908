//! The model request loop: admitting a request (the token cap; the context budget is
//! `machine::context`'s), sending attempts, folding stream items, retries with backoff, and
//! the three ways a stream ends (completed, failed, ended without completion). A completed
//! request teaches the budget its [`Scale`] and emits `budget`.
//!
//! Invariants: a `token` is emitted only for the current attempt, and once one is, that
//! request is never retried; tool calls are dispatched only from a stream that completed; a
//! truncated reply keeps its partial text (persisted before `message_done`), a failed one
//! does not; a reply past a client limit (`max_reply_bytes`, `max_thinking_bytes`,
//! `max_tool_calls`) keeps what fitted, cancels its request and ends `truncated`, so no
//! provider can grow the core's memory without bound; a duplicate call id in one reply is
//! refused with a result telling the model.

use crate::conversation::{Block, Message, Role};
use crate::provider::{ProviderItem, RequestFailure, RequestId};
use crate::wire::{Event, StopReason};

use super::phase::{AfterPersist, Phase};
use super::retry::{self, Verdict};
use super::turn::{Attempt, Call, Reply, Usage};
use super::{Core, Effect};
use crate::compaction::{self, Scale};

impl Core {
    /// Admit the next model request of the turn, or end the turn at the token cap: the cap
    /// refuses at admission only once the turn's requests have spent it (reported prompt plus
    /// completion tokens, or the estimate when the provider reported no usage), so a turn
    /// always sends at least one request and resubmitting continues the work.
    pub(super) fn start_request(&mut self) {
        let cap = self.config.limits.max_agent_tokens;
        if cap > 0 && self.turn.tokens >= cap {
            self.end_turn(StopReason::BudgetExhausted);
            return;
        }
        if let Some(r) = self.flush_notes() {
            self.persist_background(vec![r]);
        }
        self.admit_request();
    }

    /// Build the body from the conversation as it is now and send its first attempt.
    pub(super) fn send_new_request(&mut self) {
        self.set_body();
        self.turn.unreachable = 0;
        self.turn.context_retried = false;
        let request = self.next_request;
        self.next_request += 1;
        self.send_attempt(request, 1);
    }

    /// Send one attempt of the current request and wait for its stream.
    pub(super) fn send_attempt(&mut self, request: RequestId, attempt: u32) {
        let body = match self.turn.body.clone() {
            Some(b) => b,
            None => {
                self.set_body();
                // `set_body` just stored it.
                self.turn.body.clone().expect("the body was just set")
            }
        };
        self.eff(Effect::SendRequest {
            request,
            attempt,
            body,
        });
        let idle = self.idle_deadline();
        self.phase = Phase::Streaming(Box::new(Attempt::new(request, attempt, idle)));
    }

    fn idle_deadline(&self) -> Option<crate::time::Millis> {
        match self.config.retry.stream_idle_timeout_ms {
            0 => None,
            ms => Some(self.deadline(ms)),
        }
    }

    pub(super) fn on_provider(&mut self, request: RequestId, attempt: u32, item: ProviderItem) {
        let Some(mut a) = self.phase.take_attempt(request, attempt) else {
            return;
        };
        a.idle_deadline = self.idle_deadline();
        // Any item means the endpoint was reached.
        self.turn.unreachable = 0;
        match item {
            ProviderItem::Opened => {}
            ProviderItem::TextDelta { text } => {
                let room = self.room(a.content_bytes, self.config.limits.max_reply_bytes);
                let kept = prefix_within(&text, room);
                a.content_bytes += kept.len() as u64;
                if !kept.is_empty() {
                    a.text.push_str(kept);
                    self.ev(Event::Token {
                        text: kept.to_string(),
                    });
                }
                if kept.len() < text.len() {
                    let cap = self.config.limits.max_reply_bytes;
                    return self.over_limit(
                        *a,
                        format!("the reply exceeded the client's limit of {cap} bytes (limits.max_reply_bytes)"),
                    );
                }
            }
            ProviderItem::ThinkingDelta { text } => {
                let cap = self.config.limits.max_thinking_bytes;
                let kept = prefix_within(&text, self.room(a.thinking.len() as u64, cap));
                if !kept.is_empty() {
                    a.thinking.push_str(kept);
                    self.ev(Event::Thinking {
                        text: kept.to_string(),
                    });
                }
                if kept.len() < text.len() {
                    return self.over_limit(
                        *a,
                        format!("the reply's thinking exceeded the client's limit of {cap} bytes (limits.max_thinking_bytes)"),
                    );
                }
            }
            ProviderItem::ThinkingSignature { signature } => {
                if signature.len() as u64 > self.config.limits.max_thinking_bytes {
                    let cap = self.config.limits.max_thinking_bytes;
                    return self.over_limit(
                        *a,
                        format!("the reply's thinking signature exceeded the client's limit of {cap} bytes (limits.max_thinking_bytes)"),
                    );
                }
                a.signature = Some(signature);
            }
            ProviderItem::ToolCallStart { index, id, name } => {
                if let Some(message) = self.call_over_limit(&a, index, id.len() + name.len()) {
                    return self.over_limit(*a, message);
                }
                a.content_bytes += (id.len() + name.len()) as u64;
                let c = a.calls.entry(index).or_default();
                c.id = id;
                c.name = name;
            }
            ProviderItem::ToolCallArgs { index, json } => {
                if let Some(message) = self.call_over_limit(&a, index, json.len()) {
                    return self.over_limit(*a, message);
                }
                a.content_bytes += json.len() as u64;
                a.calls.entry(index).or_default().args.push_str(&json);
            }
            ProviderItem::Usage {
                prompt_tokens,
                completion_tokens,
                cached_tokens,
            } => {
                a.usage = Some(Usage {
                    prompt_tokens,
                    completion_tokens,
                    cached_tokens,
                });
            }
            ProviderItem::Completed { finish_reason } => return self.completed(*a, finish_reason),
            ProviderItem::EndedWithoutCompletion { detail } => {
                return self.stream_ended(*a, detail, false)
            }
            ProviderItem::Failed { kind, message } => {
                let had_text = !a.text.is_empty();
                return self
                    .attempt_failed(*a, retry::classify_stream_failure(kind, &message, had_text));
            }
        }
        self.phase = Phase::Streaming(a);
    }

    pub(super) fn on_request_failed(
        &mut self,
        request: RequestId,
        attempt: u32,
        failure: RequestFailure,
    ) {
        let Some(a) = self.phase.take_attempt(request, attempt) else {
            return;
        };
        self.attempt_failed(*a, retry::classify_request_failure(&failure));
    }

    /// A stream that ended with no completion signal (or stalled, `stalled`).
    pub(super) fn stream_ended(&mut self, a: Attempt, detail: String, stalled: bool) {
        if a.text.is_empty() {
            let reason = if stalled {
                format!("{detail} before any reply text")
            } else {
                "the stream ended before any reply text".to_string()
            };
            self.retry_or_give_up(a, reason, 0, false, true);
        } else {
            let message = if stalled {
                format!("the reply was cut off: {detail}")
            } else if detail.trim().is_empty() {
                "the reply stream ended without a completion signal".to_string()
            } else {
                format!("the reply stream ended without a completion signal: {detail}")
            };
            self.truncate(a.text, message);
        }
    }

    fn attempt_failed(&mut self, a: Attempt, verdict: Verdict) {
        match verdict {
            Verdict::Retry {
                reason,
                min_wait_ms,
                unreachable,
            } => self.retry_or_give_up(a, reason, min_wait_ms, unreachable, false),
            Verdict::Fail { message } => self.fail_turn(message),
            Verdict::ContextExceeded { message } => self.context_exceeded(a, message),
        }
    }

    /// What is left of a `cap` with `used` spent.
    fn room(&self, used: u64, cap: u64) -> usize {
        usize::try_from(cap.saturating_sub(used)).unwrap_or(usize::MAX)
    }

    /// Why a tool-call item adding `bytes` for call `index` breaks a limit, if it does.
    fn call_over_limit(&self, a: &Attempt, index: u32, bytes: usize) -> Option<String> {
        let limits = &self.config.limits;
        if !a.calls.contains_key(&index) && a.calls.len() as u64 >= u64::from(limits.max_tool_calls)
        {
            return Some(format!(
                "the reply made more than the client's limit of {} tool calls \
                 (limits.max_tool_calls); none of them was run",
                limits.max_tool_calls
            ));
        }
        if a.content_bytes.saturating_add(bytes as u64) > limits.max_reply_bytes {
            return Some(format!(
                "the reply exceeded the client's limit of {} bytes (limits.max_reply_bytes); \
                 its tool calls were not run",
                limits.max_reply_bytes
            ));
        }
        None
    }

    /// A reply past a client limit: the request is cancelled (nothing more is read), the text
    /// kept so far is persisted, then `message_done`, `error`, `done truncated`; no tool call of
    /// the reply runs.
    fn over_limit(&mut self, a: Attempt, message: String) {
        self.eff(Effect::CancelRequest { request: a.request });
        self.truncate(a.text, message);
    }

    fn retry_or_give_up(
        &mut self,
        a: Attempt,
        reason: String,
        min_wait_ms: u64,
        unreachable: bool,
        truncate_on_last: bool,
    ) {
        if !a.text.is_empty() {
            // Never retry once reply text streamed (a failure the shell reports late).
            return self.fail_turn(format!("the reply stream failed: {reason}"));
        }
        if unreachable {
            self.turn.unreachable += 1;
        } else {
            self.turn.unreachable = 0;
        }
        let max = self.config.retry.max_attempts;
        if self.turn.unreachable >= retry::UNREACHABLE_LIMIT {
            self.fail_turn(format!(
                "the model endpoint was unreachable {} times in a row ({reason}); giving up",
                self.turn.unreachable
            ));
        } else if a.attempt >= max {
            let message = format!(
                "the model request failed after {} attempt{}: {reason}",
                a.attempt,
                if a.attempt == 1 { "" } else { "s" }
            );
            if truncate_on_last {
                self.truncate(String::new(), message);
            } else {
                self.fail_turn(message);
            }
        } else {
            let next = a.attempt + 1;
            self.ev(Event::Retry {
                attempt: next,
                max_attempts: max,
                reason,
            });
            let backoff = retry::backoff_ms(&self.config.retry, a.attempt, &mut self.rng);
            let deadline = self.deadline(backoff.max(min_wait_ms));
            self.phase = Phase::Backoff {
                request: a.request,
                attempt: next,
                deadline,
            };
        }
    }

    /// A reply cut off: keep the partial text (persisted first), then `message_done`, `error`,
    /// `done truncated`.
    fn truncate(&mut self, text: String, message: String) {
        self.end_with_partial(text, Some(message), StopReason::Truncated);
    }

    /// End the turn after a partial reply: the text (when any) is kept and persisted, then
    /// `message_done`, the `error` (when given) and `done stop`.
    pub(super) fn end_with_partial(
        &mut self,
        text: String,
        message: Option<String>,
        stop: StopReason,
    ) {
        if text.is_empty() {
            self.finish_partial(text, message, stop);
        } else {
            let record = self.push_message(Message::assistant_text(text.clone()));
            self.persist_then(
                vec![record],
                AfterPersist::Partial {
                    text,
                    message,
                    stop,
                },
            );
        }
    }

    pub(super) fn finish_partial(
        &mut self,
        text: String,
        message: Option<String>,
        stop: StopReason,
    ) {
        self.ev(Event::MessageDone { text });
        if self.turn.failure.is_some() {
            // A crash while the partial was being persisted: its error, and `done error`.
            self.end_turn(StopReason::Error);
            return;
        }
        if let Some(message) = message {
            self.ev(Event::Error { message });
        }
        self.end_turn(stop);
    }

    /// The stream completed: build the assistant message, persist it, and continue after the
    /// ack.
    fn completed(&mut self, a: Attempt, finish_reason: String) {
        let mut content = Vec::new();
        if !a.thinking.is_empty() || a.signature.is_some() {
            content.push(Block::Thinking {
                text: a.thinking.clone(),
                signature: a.signature.clone(),
            });
        }
        if !a.text.is_empty() {
            content.push(Block::text(a.text.clone()));
        }
        let mut calls = Vec::new();
        let mut ids = std::collections::BTreeSet::new();
        for pc in a.calls.into_values() {
            let id = if pc.id.is_empty() {
                let id = format!("call_{}", self.next_call);
                self.next_call += 1;
                id
            } else {
                pc.id
            };
            let mut args = parse_args(&pc.args);
            // A second call with an id already used in this reply is not run: it gets a fresh
            // id (so every tool result pairs with one call) and a result telling the model.
            let id = if ids.contains(&id) {
                let mut n = 2;
                while ids.contains(&format!("{id}_dup{n}")) {
                    n += 1;
                }
                args = Err(format!(
                    "refused: this reply already made a call with id {id:?}; call ids must be \
                     unique within a reply, so this call (renamed {id}_dup{n}) was not run. \
                     Make the call again if it is still needed."
                ));
                format!("{id}_dup{n}")
            } else {
                id
            };
            ids.insert(id.clone());
            content.push(Block::ToolUse {
                id: id.clone(),
                name: pc.name.clone(),
                input: serde_json::Value::Object(args.clone().unwrap_or_default()),
            });
            calls.push(Call {
                id,
                name: pc.name,
                args,
                resolved: false,
                rewrite: None,
                writes: false,
            });
        }
        let spent = match a.usage {
            Some(u) => {
                self.scale = Scale::learn(u.prompt_tokens, self.turn.body_estimate);
                u.prompt_tokens.saturating_add(u.completion_tokens)
            }
            // No usage reported: the cap counts the estimate of the body and of the reply.
            None => Scale::apply(self.scale, self.turn.body_estimate).saturating_add(
                compaction::estimate_message(&Message {
                    role: Role::Assistant,
                    content: content.clone(),
                }),
            ),
        };
        self.turn.tokens = self.turn.tokens.saturating_add(spent);
        let reply = Reply {
            text: a.text,
            finish_reason,
            usage: a.usage,
            calls,
        };
        if content.is_empty() {
            self.after_reply(reply);
        } else {
            let record = self.push_message(Message {
                role: Role::Assistant,
                content,
            });
            self.persist_then(vec![record], AfterPersist::Reply(Box::new(reply)));
        }
    }

    /// The reply is on disk: `message_done`, `usage`, `budget`, then tools or the turn's end.
    pub(super) fn after_reply(&mut self, reply: Reply) {
        // A final reply always ends with message_done (even an empty one, so a turn_end
        // refusal follows a message_done); a reply that only calls tools has one when it had
        // text.
        if !reply.text.is_empty() || reply.calls.is_empty() {
            self.ev(Event::MessageDone {
                text: reply.text.clone(),
            });
        }
        if let Some(u) = reply.usage {
            self.ev(Event::Usage {
                prompt_tokens: u.prompt_tokens,
                completion_tokens: u.completion_tokens,
                cached_tokens: u.cached_tokens,
            });
        }
        self.emit_budget();
        self.turn.round = reply.calls;
        self.turn.next_call = 0;
        if let Some(stop) = self.turn.ending.clone() {
            self.end_turn(stop);
        } else if !self.turn.round.is_empty() {
            self.next_call();
        } else {
            self.start_turn_end_hooks(reply.finish_reason);
        }
    }

    /// `budget` after a model request: the scaled estimate of what the conversation would
    /// send now (the reply included), against the window.
    fn emit_budget(&mut self) {
        let used_tokens = self.scaled_estimate();
        self.ev(Event::Budget {
            used_tokens,
            context_tokens: self.config.context_tokens,
        });
    }
}

/// The longest prefix of `s` of at most `max` bytes that ends on a char boundary.
fn prefix_within(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Parse a tool call's streamed arguments: empty means `{}`; anything but a JSON object is an
/// error naming what was wrong.
fn parse_args(raw: &str) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return Ok(serde_json::Map::new());
    }
    let shown: String = trimmed.chars().take(200).collect();
    match serde_json::from_str::<serde_json::Value>(trimmed) {
        Ok(serde_json::Value::Object(m)) => Ok(m),
        Ok(_) => Err(format!("arguments are not a JSON object: {shown}")),
        Err(e) => Err(format!("arguments are not a JSON object: {e}: {shown}")),
    }
}
