//! Retries of model requests: the attempt budget, the `retry` line before each resend, the
//! Retry-After wait, failures never retried, and the three-unreachable give-up.

use std::collections::{BTreeMap, BTreeSet};

use openmax_core::machine::{Effect, Input, Output, TimerReason};
use openmax_core::provider::{FailureKind, ProviderItem, RequestFailure, RequestId};
use openmax_core::wire::StopReason;
use openmax_core::wire::{Command, Event};

use super::segment::{live_inputs, text_delivered, Turns};
use crate::scenario::Scenario;
use crate::trace::{FedInput, Run};

/// Retries: attempts never exceed `max_attempts`, each resend follows a `retry` line, no
/// `retry` follows reply text of the same request, Retry-After is honored, and failures the
/// contract does not retry are not retried. The one exception (docs/context.md): after a
/// context-length refusal and its `compacted` receipt, the request is re-sent once as its next
/// attempt with no `retry` line, even past `max_attempts`; a second refusal is never re-sent.
pub fn retries_bounded_and_never_after_reply_text(sc: &Scenario, run: &Run) -> Vec<String> {
    let max = sc.config.retry.max_attempts;
    let mut v = Vec::new();
    let texted = text_delivered(run);
    let mut retry_seen: BTreeSet<u32> = BTreeSet::new();
    let mut last_attempt: BTreeMap<RequestId, u32> = BTreeMap::new();
    let mut earliest_resend: BTreeMap<RequestId, (u64, String)> = BTreeMap::new();
    let mut no_resend: BTreeMap<RequestId, String> = BTreeMap::new();
    // The one re-send after a context-length refusal (docs/context.md): not a contract retry
    // (no `retry` line, may exceed the attempt budget), allowed once per request and only
    // after a `compacted` receipt. Requests refused so far (with whether a receipt followed),
    // and those that used their one re-send.
    let mut context_refused: BTreeMap<RequestId, bool> = BTreeMap::new();
    let mut context_resent: BTreeSet<RequestId> = BTreeSet::new();
    for (i, fed) in run.trace.iter().enumerate() {
        let context_refusal = match &fed.input {
            FedInput::Core(Input::RequestFailed {
                request,
                failure:
                    RequestFailure::Http {
                        kind: FailureKind::ContextLength,
                        ..
                    },
                ..
            })
            | FedInput::Core(Input::Provider {
                request,
                item:
                    ProviderItem::Failed {
                        kind: FailureKind::ContextLength,
                        ..
                    },
                ..
            }) if !context_resent.contains(request) => {
                context_refused.insert(*request, false);
                true
            }
            _ => false,
        };
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
            if !context_refusal {
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
            if !kind.retryable() && !context_refusal {
                no_resend.insert(*request, format!("in-stream failure {kind:?}"));
            }
        }
        for o in &fed.outputs {
            match o {
                Output::Event(Event::Compacted { .. }) => {
                    for seen in context_refused.values_mut() {
                        *seen = true;
                    }
                }
                Output::Effect(Effect::SendRequest {
                    request, attempt, ..
                }) if context_refused.get(request) == Some(&true) => {
                    context_refused.remove(request);
                    context_resent.insert(*request);
                    let expected = last_attempt.get(request).map_or(1, |a| a + 1);
                    if *attempt != expected {
                        v.push(format!(
                            "request {request} re-sent after a context-length refusal as attempt {attempt}, expected {expected}"
                        ));
                    }
                    last_attempt.insert(*request, *attempt);
                    earliest_resend.remove(request);
                }
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
                if *stop != StopReason::Error && !cancelled {
                    v.push(format!(
                        "request {request} gave up after three unreachable attempts (input #{at}) but the turn ended {stop}, not error"
                    ));
                }
            }
        }
    }
    v
}

/// A live retryable HTTP failure (429, 500, 502, 503, 504, 529; not an exhausted quota, not a
/// context-length refusal) with attempts left and a Retry-After of at most 60 s (or none) is
/// answered in its own drain by a `retry` line, and the next attempt goes out no earlier than
/// the wait unless a cancel, a crash or a failed write ends the turn first; one with a
/// Retry-After over 60 s fails the turn at once (`error`, `done error`, no `retry`).
pub fn retry_after_up_to_a_minute_waits(sc: &Scenario, run: &Run) -> Vec<String> {
    let max = sc.config.retry.max_attempts;
    let live = live_inputs(run);
    let mut v = Vec::new();
    for (i, fed) in run.trace.iter().enumerate() {
        let FedInput::Core(Input::RequestFailed {
            request,
            attempt,
            failure:
                RequestFailure::Http {
                    status,
                    retry_after_s,
                    kind,
                    ..
                },
        }) = &fed.input
        else {
            continue;
        };
        if !live.contains(&i)
            || !RequestFailure::RETRYABLE_STATUS.contains(status)
            || matches!(
                kind,
                FailureKind::InsufficientQuota | FailureKind::ContextLength
            )
        {
            continue;
        }
        let retried = fed
            .outputs
            .iter()
            .any(|o| matches!(o, Output::Event(Event::Retry { .. })));
        let failed = fed.outputs.iter().any(
            |o| matches!(o, Output::Event(Event::Done { stop_reason }) if *stop_reason == StopReason::Error),
        );
        let wait_s = retry_after_s.unwrap_or(0);
        if wait_s > 60 {
            if retried || !failed {
                v.push(format!(
                    "HTTP {status} with Retry-After {wait_s}s at input #{i} was not failed at once (over a minute is never waited)"
                ));
            }
            continue;
        }
        if *attempt >= max {
            continue;
        }
        if !retried {
            v.push(format!(
                "HTTP {status} with Retry-After {wait_s}s on attempt {attempt} of {max} at input #{i} got no retry line"
            ));
            continue;
        }
        let earliest = fed.at.0.saturating_add(wait_s.saturating_mul(1000));
        let mut resolved = false;
        for (j, later) in run.trace.iter().enumerate().skip(i + 1) {
            let sent = later.outputs.iter().any(|o| {
                matches!(o, Output::Effect(Effect::SendRequest { request: r, attempt: a, .. })
                    if r == request && *a == attempt + 1)
            });
            if sent {
                if later.at.0 < earliest {
                    v.push(format!(
                        "request {request} attempt {} went out at {} ms, before the Retry-After of {wait_s}s allowed ({earliest} ms)",
                        attempt + 1,
                        later.at.0
                    ));
                }
                resolved = true;
                break;
            }
            if later
                .outputs
                .iter()
                .any(|o| matches!(o, Output::Event(Event::Done { .. })))
            {
                // The backoff's own timer must send the attempt; a shutdown's drain deadline
                // (after quit, EOF or a signal) may end the turn during the wait.
                if matches!(
                    later.input,
                    FedInput::Timer {
                        reason: TimerReason::RetryBackoff,
                        ..
                    }
                ) {
                    v.push(format!(
                        "the turn ended at input #{j} when the backoff after input #{i} expired, instead of sending attempt {}",
                        attempt + 1
                    ));
                }
                resolved = true;
                break;
            }
        }
        if !resolved && run.went_quiet {
            v.push(format!(
                "request {request} was announced for a retry at input #{i} but attempt {} never went out",
                attempt + 1
            ));
        }
    }
    v
}
