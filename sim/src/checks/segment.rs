//! The trace segmented the way the guarantees talk about it: admitted turns (from the
//! admitting `user` to its `done`), refused users, users refused in flight, events outside any
//! turn; and which provider inputs were live when fed.
//!
//! Invariant: segmentation is a pure function of the run and never panics; the checks in the
//! sibling modules all read the same segmentation.

use std::collections::{BTreeMap, BTreeSet};

use openmax_core::conversation::{Block, Message, Role};
use openmax_core::machine::{Effect, Input, Output};
use openmax_core::provider::{ProviderItem, RequestId};
use openmax_core::record::Record;
use openmax_core::wire::StopReason;
use openmax_core::wire::{Command, Event};

use crate::trace::{FedInput, Run};

/// An admitted turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    /// Trace index of the admitting `user`.
    pub start: usize,
    /// The turn's events (trace index, event), the `done` last when it ended.
    pub lines: Vec<(usize, Event)>,
    /// The `done` stop reason and trace index, when it ended.
    pub done: Option<(usize, StopReason)>,
    /// Request ids the turn sent.
    pub requests: BTreeSet<RequestId>,
}

/// The trace segmented by turn.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Turns {
    pub turns: Vec<Turn>,
    /// Trace indices of `user` commands refused with `protocol_error` + `done refused`.
    pub refused: Vec<usize>,
    /// Trace indices of `user` commands sent while a turn was in flight.
    pub in_flight: Vec<usize>,
    /// Events outside any turn (trace index, event).
    pub outside: Vec<(usize, Event)>,
    /// Trace index of the first `quit` or end of input (in a non-interactive session, of its
    /// first `done`, which ends its input).
    pub quit_at: Option<usize>,
    /// Trace indices of `user` commands after `quit` that got no answer (openmax is draining
    /// and answers nothing more).
    pub after_quit: Vec<usize>,
}

pub(crate) fn user_text(input: &FedInput) -> Option<String> {
    match input {
        FedInput::Core(Input::Line(l)) => match Command::parse_line(l) {
            Ok(Some(Command::User { text })) => Some(text),
            _ => None,
        },
        FedInput::Core(_) | FedInput::Timer { .. } => None,
    }
}

pub(crate) fn is_quit(input: &FedInput) -> bool {
    match input {
        FedInput::Core(Input::EndOfInput) => true,
        FedInput::Core(Input::Line(l)) => matches!(Command::parse_line(l), Ok(Some(Command::Quit))),
        FedInput::Core(_) | FedInput::Timer { .. } => false,
    }
}

impl Turns {
    /// Segment a run.
    pub fn of(run: &Run) -> Turns {
        let mut t = Turns::default();
        let mut open: Option<Turn> = None;
        for (i, fed) in run.trace.iter().enumerate() {
            let ends_input = run.non_interactive
                && fed
                    .outputs
                    .iter()
                    .any(|o| matches!(o, Output::Event(Event::Done { .. })));
            if t.quit_at.is_none() && (is_quit(&fed.input) || ends_input) {
                t.quit_at = Some(i);
            }
            let mut events: Vec<&Event> = Vec::new();
            for o in &fed.outputs {
                match o {
                    Output::Event(e) => events.push(e),
                    Output::Effect(Effect::SendRequest { request, .. }) => {
                        if let Some(turn) = open.as_mut() {
                            turn.requests.insert(*request);
                        }
                    }
                    Output::Effect(_) => {}
                }
            }
            let draining = t.quit_at.is_some_and(|q| i > q);
            if user_text(&fed.input).is_some() {
                if draining && events.is_empty() {
                    t.after_quit.push(i);
                } else if open.is_some() {
                    t.in_flight.push(i);
                } else if events
                    .iter()
                    .any(|e| matches!(e, Event::Done { stop_reason } if *stop_reason == StopReason::Refused))
                {
                    t.refused.push(i);
                    t.outside.extend(events.iter().map(|e| (i, (*e).clone())));
                    continue;
                } else {
                    let mut turn = Turn {
                        start: i,
                        lines: Vec::new(),
                        done: None,
                        requests: BTreeSet::new(),
                    };
                    for o in &fed.outputs {
                        if let Output::Effect(Effect::SendRequest { request, .. }) = o {
                            turn.requests.insert(*request);
                        }
                    }
                    open = Some(turn);
                }
            }
            for e in events {
                match open.as_mut() {
                    Some(turn) => {
                        turn.lines.push((i, e.clone()));
                        if let Event::Done { stop_reason } = e {
                            turn.done = Some((i, stop_reason.clone()));
                            // The turn is closed: take it out.
                            if let Some(done) = open.take() {
                                t.turns.push(done);
                            }
                        }
                    }
                    None => t.outside.push((i, e.clone())),
                }
            }
        }
        if let Some(turn) = open {
            t.turns.push(turn);
        }
        t
    }
}

/// Approvals requested and not settled at the end of the run.
pub(crate) fn open_approvals(run: &Run) -> Vec<String> {
    let mut open = Vec::new();
    for (_, e) in run.events() {
        match e {
            Event::ApprovalRequest { approval_id, .. } => open.push(approval_id.clone()),
            Event::ApprovalSettled { approval_id, .. } => open.retain(|a| a != approval_id),
            _ => {}
        }
    }
    open
}

/// Whether the run ended waiting on the live client (no quit or EOF, an approval open): the
/// one legitimate way for an admitted turn to have no `done` yet.
pub(crate) fn waiting_on_client(run: &Run, turns: &Turns) -> bool {
    turns.quit_at.is_none() && !open_approvals(run).is_empty()
}

/// Trace indices of provider inputs (stream items, request failures) fed while their attempt
/// was live: sent, not yet ended, not cancelled, not given up on. Others are stale (a shell
/// racing a cancel delivers them late) and the core must ignore them.
pub fn live_inputs(run: &Run) -> BTreeSet<usize> {
    let mut live: BTreeSet<(RequestId, u32)> = BTreeSet::new();
    let mut out = BTreeSet::new();
    for (i, fed) in run.trace.iter().enumerate() {
        let key_end = match &fed.input {
            FedInput::Core(Input::Provider {
                request,
                attempt,
                item,
            }) => Some((
                (*request, *attempt),
                matches!(
                    item,
                    ProviderItem::Completed { .. }
                        | ProviderItem::EndedWithoutCompletion { .. }
                        | ProviderItem::Failed { .. }
                ),
            )),
            FedInput::Core(Input::RequestFailed {
                request, attempt, ..
            }) => Some(((*request, *attempt), true)),
            FedInput::Core(_) | FedInput::Timer { .. } => None,
        };
        if let Some((key, ends)) = key_end {
            if live.contains(&key) {
                out.insert(i);
                if ends {
                    live.remove(&key);
                }
            }
        }
        for o in &fed.outputs {
            match o {
                Output::Effect(Effect::SendRequest {
                    request, attempt, ..
                }) => {
                    live.insert((*request, *attempt));
                }
                Output::Effect(Effect::CancelRequest { request }) => {
                    live.retain(|(r, _)| r != request);
                }
                Output::Event(Event::Retry { .. }) | Output::Event(Event::Done { .. }) => {
                    live.clear();
                }
                Output::Event(_) | Output::Effect(_) => {}
            }
        }
    }
    out
}

/// Per (request, attempt): the first trace index at which the core accepted reply text.
pub(crate) fn text_delivered(run: &Run) -> BTreeMap<(RequestId, u32), usize> {
    let live = live_inputs(run);
    let mut m = BTreeMap::new();
    for (i, fed) in run.trace.iter().enumerate() {
        if let FedInput::Core(Input::Provider {
            request,
            attempt,
            item: ProviderItem::TextDelta { .. },
        }) = &fed.input
        {
            if live.contains(&i) {
                m.entry((*request, *attempt)).or_insert(i);
            }
        }
    }
    m
}

/// One `Persist` effect: where it went out, its records, and the input that answered it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Persisted {
    /// Trace index of the drain that emitted the `Persist`.
    pub at: usize,
    pub records: Vec<Record>,
    /// Trace index of the `Persisted` ack, when it came.
    pub acked: Option<usize>,
}

/// Every `Persist` effect of the run by ticket.
pub(crate) fn persists(run: &Run) -> BTreeMap<u64, Persisted> {
    let mut m: BTreeMap<u64, Persisted> = BTreeMap::new();
    for (i, fed) in run.trace.iter().enumerate() {
        if let FedInput::Core(Input::Persisted { ticket }) = &fed.input {
            if let Some(p) = m.get_mut(ticket) {
                p.acked.get_or_insert(i);
            }
        }
        for o in &fed.outputs {
            if let Output::Effect(Effect::Persist { ticket, records }) = o {
                m.insert(
                    *ticket,
                    Persisted {
                        at: i,
                        records: records.clone(),
                        acked: None,
                    },
                );
            }
        }
    }
    m
}

/// The records of the `Persist` whose ack is the input at trace index `i` (empty otherwise).
/// `all` is [`persists`] of the run.
pub(crate) fn acked_records(all: &BTreeMap<u64, Persisted>, run: &Run, i: usize) -> Vec<Record> {
    match run.trace.get(i).map(|f| &f.input) {
        Some(FedInput::Core(Input::Persisted { ticket })) => all
            .get(ticket)
            .map(|p| p.records.clone())
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// Every message a record carries (a compaction point carries the whole conversation).
pub(crate) fn record_messages(r: &Record) -> Vec<&Message> {
    match r {
        Record::Message { message } => vec![message],
        Record::Compaction { messages, .. } => messages.iter().collect(),
        Record::Session { .. }
        | Record::ModeChanged { .. }
        | Record::Refrozen { .. }
        | Record::TurnEnd { .. }
        | Record::Checkpoint { .. } => Vec::new(),
    }
}

/// The text blocks of the assistant messages among `messages`.
pub(crate) fn assistant_texts<'a>(messages: impl IntoIterator<Item = &'a Message>) -> Vec<String> {
    let mut out = Vec::new();
    for m in messages {
        if m.role == Role::Assistant {
            for b in &m.content {
                if let Block::Text { text } = b {
                    out.push(text.clone());
                }
            }
        }
    }
    out
}

/// The index of the admitted turn trace index `i` belongs to (from its `user` to its `done`).
pub(crate) fn turn_of(turns: &Turns, i: usize) -> Option<usize> {
    turns
        .turns
        .iter()
        .position(|t| t.start <= i && t.done.as_ref().is_none_or(|(d, _)| i <= *d))
}
