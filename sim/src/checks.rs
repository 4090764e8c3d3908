//! The turn guarantees as named checks over one [`Run`]: each returns the violations it found
//! (empty when the guarantee holds). The quickcheck properties, the golden-scenario test and
//! `openmax-sim run`/`explore` all use these same functions.
//!
//! Checks read the run's trace: every input fed, with the outputs drained right after it, so an
//! event is attributed to the input that caused it. [`Turns`] segments the trace into admitted
//! turns (from the admitting `user` to its `done`), refused users and users refused in flight.
//!
//! Invariant: a check never panics on any run; a malformed run is a violation, not a crash.

use std::collections::{BTreeMap, BTreeSet};

use openmax_core::machine::{Effect, Input, Output, TimerReason};
use openmax_core::provider::{FailureKind, ProviderItem, RequestFailure, RequestId};
use openmax_core::wire::event::STOP_REASONS;
use openmax_core::wire::{ApprovalOutcome, Command, Event};

use crate::driver::{FedInput, Run};
use crate::scenario::Scenario;

/// One broken guarantee.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The property's name.
    pub property: &'static str,
    pub message: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{}] {}", self.property, self.message)
    }
}

/// A named guarantee check.
pub type Check = fn(&Scenario, &Run) -> Vec<String>;

/// Every named guarantee, in the order. `stream_is_valid` (validator and pairing
/// checker) is first.
pub const PROPERTIES: &[(&str, Check)] = &[
    ("stream_is_valid", stream_is_valid),
    (
        "exactly_one_done_per_admitted_user",
        exactly_one_done_per_admitted_user,
    ),
    ("done_is_the_turns_last_line", done_is_the_turns_last_line),
    (
        "no_done_for_user_refused_in_flight",
        no_done_for_user_refused_in_flight,
    ),
    ("three_ending_shapes", three_ending_shapes),
    (
        "no_dispatch_from_truncated_stream",
        no_dispatch_from_truncated_stream,
    ),
    (
        "retries_bounded_and_never_after_reply_text",
        retries_bounded_and_never_after_reply_text,
    ),
    ("three_unreachable_gives_up", three_unreachable_gives_up),
    ("every_approval_settles_once", every_approval_settles_once),
    ("quit_drains", quit_drains),
    ("machine_goes_quiet", machine_goes_quiet),
    ("scenario_expectations", scenario_expectations),
];

/// Run every check; all violations, each tagged with its property.
pub fn check_all(sc: &Scenario, run: &Run) -> Vec<Violation> {
    let mut out = Vec::new();
    for (name, check) in PROPERTIES {
        for message in check(sc, run) {
            out.push(Violation {
                property: name,
                message,
            });
        }
    }
    out
}

/// Run one named check.
pub fn check_named(name: &str, sc: &Scenario, run: &Run) -> Vec<String> {
    PROPERTIES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, c)| c(sc, run))
        .unwrap_or_else(|| vec![format!("no property named {name}")])
}

/// An admitted turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    /// Trace index of the admitting `user`.
    pub start: usize,
    /// The turn's events (trace index, event), the `done` last when it ended.
    pub lines: Vec<(usize, Event)>,
    /// The `done` stop reason and trace index, when it ended.
    pub done: Option<(usize, String)>,
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
    /// Trace index of the first `quit` or end of input.
    pub quit_at: Option<usize>,
    /// Trace indices of `user` commands after `quit` that got no answer (openmax is draining
    /// and answers nothing more).
    pub after_quit: Vec<usize>,
}

fn user_text(input: &FedInput) -> Option<String> {
    match input {
        FedInput::Core(Input::Line(l)) => match Command::parse_line(l) {
            Ok(Some(Command::User { text })) => Some(text),
            _ => None,
        },
        FedInput::Core(_) | FedInput::Timer { .. } => None,
    }
}

fn is_quit(input: &FedInput) -> bool {
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
            if t.quit_at.is_none() && is_quit(&fed.input) {
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
                    .any(|e| matches!(e, Event::Done { stop_reason } if stop_reason == "refused"))
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
fn open_approvals(run: &Run) -> Vec<String> {
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
fn waiting_on_client(run: &Run, turns: &Turns) -> bool {
    turns.quit_at.is_none() && !open_approvals(run).is_empty()
}

/// Every stdout line passes the stream validator, and commands with events pass the pairing
/// checker.
pub fn stream_is_valid(_sc: &Scenario, run: &Run) -> Vec<String> {
    crate::oracle::validate(run)
}

/// Every admitted `user` gets exactly one `done`; every refused `user` exactly one.
pub fn exactly_one_done_per_admitted_user(_sc: &Scenario, run: &Run) -> Vec<String> {
    let turns = Turns::of(run);
    let mut v = Vec::new();
    for turn in &turns.turns {
        if turn.done.is_none() && !(waiting_on_client(run, &turns) && run.went_quiet) {
            v.push(format!(
                "the user admitted at input #{} never got a done",
                turn.start
            ));
        }
    }
    for &i in &turns.refused {
        let dones = run.trace[i]
            .outputs
            .iter()
            .filter(|o| matches!(o, Output::Event(Event::Done { .. })))
            .count();
        if dones != 1 {
            v.push(format!(
                "the refused user at input #{i} got {dones} done lines"
            ));
        }
        let first = run.trace[i].outputs.iter().find_map(|o| match o {
            Output::Event(e) => Some(e),
            Output::Effect(_) => None,
        });
        if !matches!(first, Some(Event::ProtocolError { .. })) {
            v.push(format!(
                "the refused user at input #{i} did not get a protocol_error before its done"
            ));
        }
    }
    for (i, e) in &turns.outside {
        if let Event::Done { stop_reason } = e {
            if !turns.refused.contains(i) {
                v.push(format!(
                    "a done ({stop_reason}) at input #{i} answers no admitted or refused user"
                ));
            }
        }
    }
    // A user whose text is empty, or any user in an untrusted project, is refused.
    v
}

/// Nothing of a turn comes after its `done`: between turns only session-level lines appear.
pub fn done_is_the_turns_last_line(_sc: &Scenario, run: &Run) -> Vec<String> {
    let turns = Turns::of(run);
    let mut v = Vec::new();
    for (i, e) in &turns.outside {
        let ok = match e {
            Event::ProtocolError { .. }
            | Event::ApprovalMode { .. }
            | Event::Refrozen { .. }
            | Event::HookFailed { .. } => true,
            // A session-level note (refreeze receipt, mode notice) rides no tool result.
            Event::HarnessNote { call_id, .. } => call_id.is_empty(),
            Event::Done { .. } => turns.refused.contains(i),
            _ => false,
        };
        if !ok {
            v.push(format!(
                "a {} line at input #{i} is outside any turn (after the last done)",
                e.type_name()
            ));
        }
    }
    v
}

/// A `user` sent while a turn is in flight gets a `protocol_error` alone.
pub fn no_done_for_user_refused_in_flight(_sc: &Scenario, run: &Run) -> Vec<String> {
    let turns = Turns::of(run);
    let mut v = Vec::new();
    for &i in &turns.in_flight {
        let events: Vec<&str> = run.trace[i]
            .outputs
            .iter()
            .filter_map(|o| match o {
                Output::Event(e) => Some(e.type_name()),
                Output::Effect(_) => None,
            })
            .collect();
        if events != ["protocol_error"] {
            v.push(format!(
                "a user sent while a turn was in flight (input #{i}) got {events:?}, not a protocol_error alone"
            ));
        }
    }
    v
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
fn text_delivered(run: &Run) -> BTreeMap<(RequestId, u32), usize> {
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

/// The three ending shapes: normal (`message_done` … `done`), stream error (`error`, `done`
/// with no `message_done` for the partial text), truncated (`message_done`, `error`, `done
/// truncated`); and a crash is `error` then `done error`.
pub fn three_ending_shapes(_sc: &Scenario, run: &Run) -> Vec<String> {
    let turns = Turns::of(run);
    let texted = text_delivered(run);
    let live = live_inputs(run);
    let mut v = Vec::new();
    for turn in &turns.turns {
        let types: Vec<&str> = turn.lines.iter().map(|(_, e)| e.type_name()).collect();
        // An error line is always the line before done (or before it, message_done).
        for (k, t) in types.iter().enumerate() {
            if *t == "error" && types.get(k + 1) != Some(&"done") {
                v.push(format!(
                    "turn at input #{}: an error line is not directly followed by done ({:?})",
                    turn.start,
                    &types[k..types.len().min(k + 3)]
                ));
            }
        }
        let Some((_, stop)) = &turn.done else {
            continue;
        };
        let n = types.len();
        let before = |k: usize| if n > k { types[n - 1 - k] } else { "" };
        match stop.as_str() {
            "truncated" if before(1) != "error" || before(2) != "message_done" => {
                v.push(format!(
                    "turn at input #{} ended truncated without message_done, error, done: {:?}",
                    turn.start,
                    &types[n.saturating_sub(3)..]
                ));
            }
            "error" if before(1) != "error" => {
                v.push(format!(
                    "turn at input #{} ended error without an error line before done",
                    turn.start
                ));
            }
            _ => {}
        }
        // A token run is closed by message_done unless the turn failed or was cancelled.
        let mut open_tokens = 0usize;
        for t in &types {
            match *t {
                "token" => open_tokens += 1,
                "message_done" => open_tokens = 0,
                _ => {}
            }
        }
        if open_tokens > 0 && !matches!(stop.as_str(), "error" | "cancelled") {
            v.push(format!(
                "turn at input #{} ended {stop} with {open_tokens} token lines never closed by message_done",
                turn.start
            ));
        }
        let normal = !STOP_REASONS.contains(&stop.as_str());
        if normal && types.contains(&"error") {
            v.push(format!(
                "turn at input #{} ended normally ({stop}) but carried an error line",
                turn.start
            ));
        }
        // Script-linked: how the turn's stream endings must show on the wire.
        let end = turn.done.as_ref().map(|(i, _)| *i).unwrap_or(usize::MAX);
        for (i, fed) in run.trace.iter().enumerate() {
            if i < turn.start || i > end {
                continue;
            }
            let (request, attempt, ending) = match &fed.input {
                FedInput::Core(Input::Provider {
                    request,
                    attempt,
                    item:
                        item @ (ProviderItem::Failed { .. }
                        | ProviderItem::EndedWithoutCompletion { .. }),
                }) => (*request, *attempt, item),
                _ => continue,
            };
            if !live.contains(&i)
                || !turn.requests.contains(&request)
                || !texted.contains_key(&(request, attempt))
            {
                continue;
            }
            // Lines of this turn from this input on.
            let rest: Vec<&str> = turn
                .lines
                .iter()
                .filter(|(k, _)| *k >= i)
                .map(|(_, e)| e.type_name())
                .collect();
            let interrupted = run.trace[i..=end.min(run.trace.len() - 1)].iter().any(|f| {
                matches!(
                    f.input,
                    FedInput::Core(Input::Crashed { .. } | Input::PersistFailed { .. })
                )
            });
            if rest.is_empty() || interrupted {
                continue;
            }
            match ending {
                ProviderItem::Failed { .. } => {
                    if rest.contains(&"message_done") || stop != "error" {
                        v.push(format!(
                            "a stream failing after reply text (input #{i}) must end error, done error with no message_done; got {rest:?}"
                        ));
                    }
                }
                _ => {
                    if stop != "truncated" {
                        v.push(format!(
                            "a stream ending without completion after reply text (input #{i}) must end truncated; got {rest:?}"
                        ));
                    }
                }
            }
        }
    }
    // A crash of a running turn ends it error.
    for turn in &turns.turns {
        let Some((end, stop)) = &turn.done else {
            continue;
        };
        if let FedInput::Core(Input::Crashed { .. }) = run.trace[*end].input {
            if stop != "error" {
                v.push(format!(
                    "a crash (input #{end}) ended the turn with done {stop}, not error"
                ));
            }
        }
    }
    v
}

/// No tool call of a stream that never delivered its completion signal is planned, run or
/// started.
pub fn no_dispatch_from_truncated_stream(_sc: &Scenario, run: &Run) -> Vec<String> {
    let mut v = Vec::new();
    let mut check = |what: &str, call_id: &str, i: usize| {
        if run.streamed_calls.contains(call_id) && !run.completed_calls.contains(call_id) {
            v.push(format!(
                "{what} for call {call_id} (input #{i}) whose stream never completed"
            ));
        }
    };
    for (i, e) in run.effects() {
        match e {
            Effect::PlanTool { call_id, .. } => check("PlanTool", call_id, i),
            Effect::RunTool { call_id, .. } => check("RunTool", call_id, i),
            _ => {}
        }
    }
    for (i, e) in run.events() {
        if let Event::ToolStart { call_id, .. } = e {
            check("tool_start", call_id, i);
        }
    }
    v
}

/// Retries: attempts never exceed `max_attempts`, each resend follows a `retry` line, no
/// `retry` follows reply text of the same request, Retry-After is honored, and failures the
/// contract does not retry are not retried.
pub fn retries_bounded_and_never_after_reply_text(sc: &Scenario, run: &Run) -> Vec<String> {
    let max = sc.config.retry.max_attempts;
    let mut v = Vec::new();
    let texted = text_delivered(run);
    let mut retry_seen: BTreeSet<u32> = BTreeSet::new();
    let mut last_attempt: BTreeMap<RequestId, u32> = BTreeMap::new();
    let mut earliest_resend: BTreeMap<RequestId, (u64, String)> = BTreeMap::new();
    let mut no_resend: BTreeMap<RequestId, String> = BTreeMap::new();
    for (i, fed) in run.trace.iter().enumerate() {
        if let FedInput::Core(Input::RequestFailed {
            request,
            failure:
                RequestFailure::Http {
                    status,
                    retry_after_s,
                    kind,
                    ..
                },
            ..
        }) = &fed.input
        {
            {
                if let Some(s) = retry_after_s {
                    if *s > 60 {
                        no_resend.insert(*request, format!("Retry-After {s}s"));
                    } else {
                        earliest_resend
                            .insert(*request, (fed.at.0 + s * 1000, format!("Retry-After {s}s")));
                    }
                }
                if *kind == FailureKind::InsufficientQuota {
                    no_resend.insert(*request, "insufficient_quota".into());
                } else if !RequestFailure::RETRYABLE_STATUS.contains(status) {
                    no_resend.insert(*request, format!("status {status}"));
                }
            }
        }
        if let FedInput::Core(Input::Provider {
            request,
            item: ProviderItem::Failed { kind, .. },
            ..
        }) = &fed.input
        {
            if !kind.retryable() {
                no_resend.insert(*request, format!("in-stream failure {kind:?}"));
            }
        }
        for o in &fed.outputs {
            match o {
                Output::Event(Event::Retry {
                    attempt,
                    max_attempts,
                    ..
                }) => {
                    if *max_attempts != max {
                        v.push(format!(
                            "retry at input #{i} says max_attempts {max_attempts}, configured {max}"
                        ));
                    }
                    if *attempt < 2 || *attempt > max {
                        v.push(format!(
                            "retry at input #{i} announces attempt {attempt} of {max}"
                        ));
                    }
                    retry_seen.insert(*attempt);
                }
                Output::Effect(Effect::SendRequest {
                    request, attempt, ..
                }) => {
                    if *attempt > max {
                        v.push(format!(
                            "request {request} sent attempt {attempt} over max_attempts {max}"
                        ));
                    }
                    let expected = last_attempt.get(request).map_or(1, |a| a + 1);
                    if *attempt != expected {
                        v.push(format!(
                            "request {request} sent attempt {attempt}, expected {expected}"
                        ));
                    }
                    last_attempt.insert(*request, *attempt);
                    if *attempt > 1 {
                        if !retry_seen.remove(attempt) {
                            v.push(format!(
                                "request {request} attempt {attempt} went out with no retry line before it"
                            ));
                        }
                        if let Some(((_, a), _)) = texted
                            .range((*request, 0)..(*request, *attempt))
                            .find(|(_, at)| **at < i)
                        {
                            v.push(format!(
                                "request {request} resent (attempt {attempt}) after attempt {a} delivered reply text"
                            ));
                        }
                        if let Some(why) = no_resend.get(request) {
                            v.push(format!(
                                "request {request} resent (attempt {attempt}) after {why}, which is never retried"
                            ));
                        }
                        if let Some((t, why)) = earliest_resend.get(request) {
                            if fed.at.0 < *t {
                                v.push(format!(
                                    "request {request} resent at {} before {why} allowed ({t})",
                                    fed.at.0
                                ));
                            }
                        }
                    }
                    earliest_resend.remove(request);
                }
                Output::Event(_) | Output::Effect(_) => {}
            }
        }
    }
    // A cancel during the backoff ends the turn and the announced attempt never goes out.
    let mut announced: Option<u32> = None;
    let mut cancelled_in_backoff: Option<usize> = None;
    let quit_at = Turns::of(run).quit_at.unwrap_or(usize::MAX);
    for (i, fed) in run.trace.iter().enumerate() {
        // Commands after quit are not read (openmax is draining).
        if announced.is_some() && cancelled_in_backoff.is_none() && i < quit_at {
            if let FedInput::Core(Input::Line(l)) = &fed.input {
                if matches!(Command::parse_line(l), Ok(Some(Command::Cancel))) {
                    cancelled_in_backoff = Some(i);
                }
            }
        }
        for o in &fed.outputs {
            match o {
                Output::Event(Event::Retry { attempt, .. }) => announced = Some(*attempt),
                Output::Event(Event::Done { .. }) => {
                    announced = None;
                    cancelled_in_backoff = None;
                }
                Output::Effect(Effect::SendRequest {
                    request, attempt, ..
                }) => {
                    if let (Some(a), Some(c)) = (announced, cancelled_in_backoff) {
                        if *attempt == a {
                            v.push(format!(
                                "request {request} attempt {attempt} went out after a cancel during its backoff (input #{c})"
                            ));
                        }
                    }
                    announced = None;
                }
                Output::Event(_) | Output::Effect(_) => {}
            }
        }
    }
    // On the wire: no retry after a token of the same request (no message_done between).
    for turn in Turns::of(run).turns {
        let mut tokens = 0;
        for (i, e) in &turn.lines {
            match e {
                Event::Token { .. } => tokens += 1,
                Event::MessageDone { .. } => tokens = 0,
                Event::Retry { .. } if tokens > 0 => v.push(format!(
                    "retry at input #{i} after {tokens} token lines of the same request"
                )),
                _ => {}
            }
        }
    }
    v
}

/// Three attempts in a row that never reached the endpoint give up before the budget: no
/// fourth attempt, and the turn ends with an error.
pub fn three_unreachable_gives_up(_sc: &Scenario, run: &Run) -> Vec<String> {
    let mut v = Vec::new();
    let mut streak: BTreeMap<RequestId, u32> = BTreeMap::new();
    let mut gave_up: BTreeMap<RequestId, usize> = BTreeMap::new();
    let live = live_inputs(run);
    for (i, fed) in run.trace.iter().enumerate() {
        let input = if live.contains(&i) {
            &fed.input
        } else {
            &FedInput::Core(Input::Timeout)
        };
        match input {
            FedInput::Core(Input::RequestFailed {
                request,
                failure: RequestFailure::Unreachable { .. },
                ..
            }) => {
                let s = streak.entry(*request).or_insert(0);
                *s += 1;
                if *s >= 3 {
                    gave_up.entry(*request).or_insert(i);
                }
            }
            FedInput::Core(Input::RequestFailed { request, .. })
            | FedInput::Core(Input::Provider { request, .. }) => {
                streak.insert(*request, 0);
            }
            FedInput::Core(_) | FedInput::Timer { .. } => {}
        }
        for o in &fed.outputs {
            if let Output::Effect(Effect::SendRequest {
                request, attempt, ..
            }) = o
            {
                if let Some(at) = gave_up.get(request) {
                    v.push(format!(
                        "request {request} sent attempt {attempt} after three unreachable attempts in a row (input #{at})"
                    ));
                }
            }
        }
    }
    let turns = Turns::of(run);
    for (request, at) in &gave_up {
        if let Some(turn) = turns.turns.iter().find(|t| t.requests.contains(request)) {
            if let Some((_, stop)) = &turn.done {
                let cancelled = run.trace[turn.start..]
                    .iter()
                    .any(|f| matches!(&f.input, FedInput::Core(Input::Line(l)) if matches!(Command::parse_line(l), Ok(Some(Command::Cancel)))));
                if stop != "error" && !cancelled {
                    v.push(format!(
                        "request {request} gave up after three unreachable attempts (input #{at}) but the turn ended {stop}, not error"
                    ));
                }
            }
        }
    }
    v
}

/// Every `approval_request` settles exactly once, after it was requested; an `approve` for an
/// open id settles it as answered; one for an unknown or settled id is a `protocol_error`;
/// after quit or end of input, pending and later approvals are declined.
pub fn every_approval_settles_once(_sc: &Scenario, run: &Run) -> Vec<String> {
    let turns = Turns::of(run);
    let mut v = Vec::new();
    let mut open: Vec<String> = Vec::new();
    let mut settled: BTreeSet<String> = BTreeSet::new();
    let mut must_decline: BTreeSet<String> = BTreeSet::new();
    for (i, fed) in run.trace.iter().enumerate() {
        let quitting = turns.quit_at.is_some_and(|q| i >= q);
        if turns.quit_at == Some(i) {
            must_decline.extend(open.iter().cloned());
        }
        let after_quit = turns.quit_at.is_some_and(|q| i > q);
        if let (FedInput::Core(Input::Line(l)), false) = (&fed.input, after_quit) {
            if let Ok(Some(Command::Approve {
                approval_id,
                approved,
            })) = Command::parse_line(l)
            {
                let events: Vec<&Event> = fed
                    .outputs
                    .iter()
                    .filter_map(|o| match o {
                        Output::Event(e) => Some(e),
                        Output::Effect(_) => None,
                    })
                    .collect();
                if open.contains(&approval_id) {
                    let want = if approved {
                        ApprovalOutcome::Approved
                    } else {
                        ApprovalOutcome::Declined
                    };
                    let got = events.iter().find_map(|e| match e {
                        Event::ApprovalSettled {
                            approval_id: id,
                            outcome,
                        } if *id == approval_id => Some(*outcome),
                        _ => None,
                    });
                    if got != Some(want) && !quitting {
                        v.push(format!(
                            "approve {approval_id} approved={approved} at input #{i} settled as {got:?}"
                        ));
                    }
                } else if !events
                    .iter()
                    .any(|e| matches!(e, Event::ProtocolError { .. }))
                {
                    v.push(format!(
                        "approve for an unknown or settled id {approval_id:?} at input #{i} got no protocol_error"
                    ));
                }
            }
        }
        for o in &fed.outputs {
            match o {
                Output::Event(Event::ApprovalRequest { approval_id, .. }) => {
                    if open.contains(approval_id) || settled.contains(approval_id) {
                        v.push(format!("approval id {approval_id} requested twice"));
                    }
                    open.push(approval_id.clone());
                    if quitting {
                        must_decline.insert(approval_id.clone());
                    }
                }
                Output::Event(Event::ApprovalSettled {
                    approval_id,
                    outcome,
                }) => {
                    if !open.contains(approval_id) {
                        v.push(format!(
                            "approval {approval_id} settled ({outcome:?}) at input #{i} but it is not open"
                        ));
                    }
                    open.retain(|a| a != approval_id);
                    settled.insert(approval_id.clone());
                    if must_decline.contains(approval_id) && *outcome != ApprovalOutcome::Declined {
                        v.push(format!(
                            "approval {approval_id} pending at or raised after quit/EOF settled {outcome:?}, not declined"
                        ));
                    }
                }
                Output::Event(_) | Output::Effect(_) => {}
            }
        }
    }
    let live_wait = turns.quit_at.is_none() && run.went_quiet;
    if !open.is_empty() && !live_wait {
        v.push(format!("approvals never settled: {open:?}"));
    }
    v
}

/// After `quit` or end of input: the in-flight turn drains to its `done`, no new turn starts,
/// then the `Exit` effect is the last output, with code 1 exactly when the last turn ended
/// `error`.
pub fn quit_drains(_sc: &Scenario, run: &Run) -> Vec<String> {
    let turns = Turns::of(run);
    let mut v = Vec::new();
    let Some(q) = turns.quit_at else {
        if let Some(code) = run.exit_code {
            v.push(format!("exit {code} with no quit or end of input"));
        }
        return v;
    };
    let Some(code) = run.exit_code else {
        v.push(format!(
            "quit/EOF at input #{q} but the session never exited"
        ));
        return v;
    };
    for turn in &turns.turns {
        if turn.start > q {
            v.push(format!(
                "a turn was admitted at input #{} after quit/EOF at input #{q}",
                turn.start
            ));
        }
        if turn.done.is_none() {
            v.push(format!(
                "exited with the turn admitted at input #{} never done",
                turn.start
            ));
        }
    }
    if let Some(last) = run.trace.last() {
        if !matches!(
            last.outputs.last(),
            Some(Output::Effect(Effect::Exit { .. }))
        ) {
            v.push("the Exit effect is not the session's last output".into());
        }
    }
    // "1 when the last turn ended with stop_reason error": a refused user starts no turn.
    let last_stop = turns
        .turns
        .iter()
        .filter_map(|t| t.done.as_ref())
        .next_back()
        .map(|(_, s)| s.as_str());
    let want = if last_stop == Some("error") { 1 } else { 0 };
    if code != want {
        v.push(format!(
            "exit code {code}, expected {want} (last turn ended {last_stop:?})"
        ));
    }
    v
}

/// The machine goes quiet: the driver hit neither its step cap nor a timer that fires without
/// moving; a run that got quit/EOF ends by exiting with no timer left armed.
pub fn machine_goes_quiet(_sc: &Scenario, run: &Run) -> Vec<String> {
    let mut v = run.violations.clone();
    let mut last: Option<(u64, TimerReason)> = None;
    let mut same_instant = 0u32;
    for fed in &run.trace {
        if let FedInput::Timer { deadline, reason } = fed.input {
            if last.is_some_and(|(t, _)| deadline.0 < t) {
                v.push(format!(
                    "timer {reason:?} at {} fired after a later one at {}",
                    deadline.0,
                    last.map_or(0, |l| l.0)
                ));
            }
            if last.is_some_and(|(t, _)| t == deadline.0) {
                same_instant += 1;
            } else {
                same_instant = 0;
            }
            if same_instant > 8 {
                v.push(format!("timers keep firing at {} (busy loop)", deadline.0));
                break;
            }
            last = Some((deadline.0, reason));
        } else {
            last = None;
        }
    }
    v
}

/// A scenario's `expect` section.
pub fn scenario_expectations(sc: &Scenario, run: &Run) -> Vec<String> {
    let mut v = Vec::new();
    if let Some(code) = sc.expect.exit_code {
        if run.exit_code != Some(code) {
            v.push(format!("expected exit {code}, got {:?}", run.exit_code));
        }
    }
    if let Some(want) = &sc.expect.run_tools {
        let got: Vec<String> = run
            .effects()
            .filter_map(|(_, e)| match e {
                Effect::RunTool { call_id, .. } => Some(call_id.clone()),
                _ => None,
            })
            .collect();
        if &got != want {
            v.push(format!("expected RunTool for {want:?}, got {got:?}"));
        }
    }
    if let Some(n) = sc.expect.requests_sent {
        if run.sends.len() != n {
            v.push(format!(
                "expected {n} requests sent, got {}",
                run.sends.len()
            ));
        }
    }
    v
}

/// Liveness, for a [`crate::gen::LiveScenario`]: after the faults stop (`heal`) and the client
/// cancels, the next `user` is admitted and completes normally: the default reply's
/// `message_done`, then `done` with the provider's finish reason.
pub fn liveness_after_faults(sc: &Scenario, run: &Run) -> Vec<String> {
    let turns = Turns::of(run);
    let Some(last_user) = run
        .trace
        .iter()
        .rposition(|f| user_text(&f.input).as_deref() == Some(crate::gen::LIVENESS_PROMPT))
    else {
        return vec!["the final user was never fed".into()];
    };
    let Some(turn) = turns.turns.iter().find(|t| t.start == last_user) else {
        return vec![format!(
            "the user after the faults stopped (input #{last_user}) was not admitted"
        )];
    };
    let want = sc.config.flavor.default_finish(false);
    let mut v = Vec::new();
    match &turn.done {
        Some((_, stop)) if stop == want => {}
        Some((_, stop)) => v.push(format!(
            "the user after the faults stopped ended {stop}, not {want}"
        )),
        None => v.push("the user after the faults stopped never got a done".into()),
    }
    if !turn
        .lines
        .iter()
        .any(|(_, e)| matches!(e, Event::MessageDone { text } if text == "ok"))
    {
        v.push("the user after the faults stopped got no message_done \"ok\"".into());
    }
    v
}
