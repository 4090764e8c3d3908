//! What the conversation keeps: only text the client saw finished (a `message_done`) and only
//! thinking of an attempt that completed ever reaches the session record or a later request.
//! The contract says a failed stream's partial text "is not kept", and a retried attempt's
//! thinking is void; these checks read the records acknowledged on disk and every request body.

use std::collections::{BTreeMap, BTreeSet};

use openmax_core::conversation::{Block, Message, Role};
use openmax_core::machine::{Effect, Input, Output};
use openmax_core::provider::{ProviderItem, RequestId};
use openmax_core::wire::Event;
use openmax_core::wire::StopReason;

use super::segment::{assistant_texts, live_inputs, persists, record_messages, turn_of, Turns};
use crate::scenario::Scenario;
use crate::trace::{FedInput, Run};

/// Every assistant text in a record on disk or in a request body equals a `message_done`
/// text: of the same turn (a record is written before its `message_done`) or already emitted
/// (a body), or it came with the `--continue` history.
pub fn only_message_done_text_is_kept(sc: &Scenario, run: &Run) -> Vec<String> {
    let turns = Turns::of(run);
    let history: BTreeSet<String> = assistant_texts(&sc.config.history).into_iter().collect();
    // message_done texts: (trace index, position in the drain, turn, text).
    let mut done: Vec<(usize, usize, Option<usize>, String)> = Vec::new();
    for (i, fed) in run.trace.iter().enumerate() {
        for (k, o) in fed.outputs.iter().enumerate() {
            if let Output::Event(Event::MessageDone { text }) = o {
                done.push((i, k, turn_of(&turns, i), text.clone()));
            }
        }
    }
    let shown_before = |i: usize, k: usize, text: &str| {
        history.contains(text)
            || done
                .iter()
                .any(|(j, l, _, t)| (*j, *l) < (i, k) && t == text)
    };
    let mut v = Vec::new();
    for (ticket, p) in persists(run) {
        let Some(acked) = p.acked else { continue };
        // Known gap, not judged here: the turn failed (another write failed, a crash) while
        // this record was in flight, so it got no `message_done`; the core cannot recall a
        // write already handed to the shell (see docs/testing.md).
        let failed_meanwhile = run.trace[p.at..acked].iter().any(|f| {
            f.outputs.iter().any(
                |o| matches!(o, Output::Event(Event::Done { stop_reason }) if *stop_reason == StopReason::Error),
            )
        });
        if failed_meanwhile {
            continue;
        }
        let turn = turn_of(&turns, p.at);
        for r in &p.records {
            for text in assistant_texts(record_messages(r)) {
                let in_turn =
                    turn.is_some() && done.iter().any(|(_, _, t, d)| *t == turn && *d == text);
                if !in_turn && !shown_before(acked, usize::MAX, &text) {
                    v.push(format!(
                        "assistant text {text:?} reached the record (ticket {ticket}, input #{}) but no message_done of its turn carried it",
                        p.at
                    ));
                }
            }
        }
    }
    for (i, fed) in run.trace.iter().enumerate() {
        for (k, o) in fed.outputs.iter().enumerate() {
            if let Output::Effect(Effect::SendRequest {
                request,
                attempt,
                body,
            }) = o
            {
                for text in assistant_texts(&body.messages) {
                    if !shown_before(i, k, &text) {
                        v.push(format!(
                            "request {request} attempt {attempt} (input #{i}) sends assistant text {text:?} that no earlier message_done carried"
                        ));
                    }
                }
            }
        }
    }
    v
}

/// The thinking each attempt streamed while it was live.
fn thinking_by_attempt(run: &Run) -> BTreeMap<(RequestId, u32), String> {
    let live = live_inputs(run);
    let mut m: BTreeMap<(RequestId, u32), String> = BTreeMap::new();
    for (i, fed) in run.trace.iter().enumerate() {
        if let FedInput::Core(Input::Provider {
            request,
            attempt,
            item: ProviderItem::ThinkingDelta { text },
        }) = &fed.input
        {
            if live.contains(&i) {
                m.entry((*request, *attempt)).or_default().push_str(text);
            }
        }
    }
    m
}

fn thinking_blocks<'a>(messages: impl IntoIterator<Item = &'a Message>) -> Vec<String> {
    let mut out = Vec::new();
    for m in messages {
        if m.role == Role::Assistant {
            for b in &m.content {
                if let Block::Thinking { text, .. } = b {
                    out.push(text.clone());
                }
            }
        }
    }
    out
}

/// The thinking of an attempt that did not complete (retried, failed, cut off, cancelled)
/// never reaches a record or a request: a completed reply's record carries exactly its own
/// attempt's thinking, and every thinking block sent or written is that of a completed
/// attempt (or came with the history).
pub fn voided_thinking_never_kept(sc: &Scenario, run: &Run) -> Vec<String> {
    let live = live_inputs(run);
    let thinking = thinking_by_attempt(run);
    let mut kept: BTreeSet<String> = thinking_blocks(&sc.config.history).into_iter().collect();
    kept.insert(String::new());
    let mut v = Vec::new();
    for (i, fed) in run.trace.iter().enumerate() {
        if let FedInput::Core(Input::Provider {
            request,
            attempt,
            item: ProviderItem::Completed { .. },
        }) = &fed.input
        {
            if live.contains(&i) {
                let own = thinking
                    .get(&(*request, *attempt))
                    .cloned()
                    .unwrap_or_default();
                kept.insert(own.clone());
                for o in &fed.outputs {
                    if let Output::Effect(Effect::Persist { records, .. }) = o {
                        for t in thinking_blocks(records.iter().flat_map(record_messages)) {
                            if t != own {
                                v.push(format!(
                                    "the reply of request {request} attempt {attempt} (input #{i}) is written with thinking {t:?}, but that attempt streamed {own:?}"
                                ));
                            }
                        }
                    }
                }
            }
        }
        for o in &fed.outputs {
            let (what, blocks) = match o {
                Output::Effect(Effect::SendRequest {
                    request,
                    attempt,
                    body,
                }) => (
                    format!("request {request} attempt {attempt}"),
                    thinking_blocks(&body.messages),
                ),
                Output::Effect(Effect::Persist { ticket, records }) => (
                    format!("record ticket {ticket}"),
                    thinking_blocks(records.iter().flat_map(record_messages)),
                ),
                Output::Effect(_) | Output::Event(_) => continue,
            };
            for t in blocks {
                if !kept.contains(&t) {
                    v.push(format!(
                        "{what} (input #{i}) carries thinking {t:?} of no completed attempt"
                    ));
                }
            }
        }
    }
    v
}
