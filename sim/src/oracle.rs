//! The contract's oracles applied to a run: the core's pairing checker over the interleaved
//! stdin/stdout record (it feeds every stdout line, hello included, to the core's stream
//! validator as well).
//!
//! Invariant: this module only adapts a [`Run`] to the oracles' inputs; the rules live in
//! `openmax_core::validate`. Framing faults have no stdin line to record (the shell skipped
//! the bytes); the pairing checker accepts the `protocol_error` they get.
//!
//! LOCAL ADAPTER (see [`steps`]): an `approval_mode` or `reload` answered later (after its save
//! or refreeze effect) is recorded where its answer comes, not where it was written.

use openmax_core::machine::{Effect, Input, Output};
use openmax_core::validate::{PairingChecker, Step, Where};
use openmax_core::wire::Command;

use crate::driver::{FedInput, Run};

/// Every violation the oracles report, in plain words.
///
/// A run that never got `quit` or end of input is a live session cut short: its end-of-stream
/// violations (an open turn, an unsettled approval) only say the client has not finished, so
/// they are dropped; the guarantee checks judge whether such a session was really stuck.
pub fn validate(run: &Run) -> Vec<String> {
    let steps = steps(run);
    let finished = steps.iter().any(|s| match s {
        Step::EndOfInput => true,
        Step::Command(l) => matches!(Command::parse_line(l), Ok(Some(Command::Quit))),
        Step::Event(_) => false,
    });
    PairingChecker::check(&steps)
        .into_iter()
        .filter(|v| finished || v.at != Where::End)
        .map(|v| v.to_string())
        .collect()
}

/// What a deferred command waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Deferred {
    Mode,
    Reload,
}

/// The run as the pairing checker's steps.
///
/// The checker matches each `protocol_error` to the oldest command owed an answer. An
/// `approval_mode` or `reload` whose answer waits for a save / refreeze effect would then take
/// the `protocol_error` of a later command (a `user` in flight, an empty `user`, a bad line) as
/// its own, and its real acknowledgement would look unexpected. So such a command is recorded
/// right before the input that answers it (`ModeSaved`/`ModeSaveFailed`, `Frozen`), or before
/// `quit`/end of input if that comes first. What the checker owes an `approval_mode` does not
/// depend on the turn state; a `reload` is only moved when a turn is in flight at both places
/// or at neither, so the checker decides the same.
pub fn steps(run: &Run) -> Vec<Step> {
    let turns = crate::checks::Turns::of(run);
    let in_flight = |i: usize| {
        turns
            .turns
            .iter()
            .any(|t| t.start < i && t.done.as_ref().is_none_or(|(d, _)| *d >= i))
    };
    // Pair each deferrable command with the input that answers it, in order.
    let mut deferred_to: std::collections::BTreeMap<usize, usize> = Default::default();
    let limit = run
        .trace
        .iter()
        .position(|f| {
            matches!(&f.input, FedInput::Core(Input::EndOfInput))
                || matches!(&f.input, FedInput::Core(Input::Line(l)) if matches!(Command::parse_line(l), Ok(Some(Command::Quit))))
        })
        .unwrap_or(run.trace.len());
    for kind in [Deferred::Mode, Deferred::Reload] {
        let asks: Vec<usize> = (0..run.trace.len())
            .filter(|&i| asks_for(run, i) == Some(kind))
            .collect();
        let answers: Vec<usize> = (0..run.trace.len())
            .filter(|&i| answers_kind(&run.trace[i].input) == Some(kind))
            .collect();
        for (k, &i) in asks.iter().enumerate() {
            let j = answers.get(k).copied().unwrap_or(usize::MAX).min(limit);
            if kind == Deferred::Mode || in_flight(i) == in_flight(j.min(run.trace.len())) {
                deferred_to.insert(i, j);
            }
        }
    }
    let mut out = vec![Step::Event(run.hello.clone())];
    let mut waiting: Vec<(usize, String)> = Vec::new();
    for (i, f) in run.trace.iter().enumerate() {
        // Deferred commands due here go first.
        waiting.retain(|(due, line)| {
            if *due <= i {
                out.push(Step::Command(line.clone()));
                false
            } else {
                true
            }
        });
        match &f.input {
            FedInput::Core(Input::Line(l)) => match deferred_to.get(&i) {
                Some(&j) if j > i => waiting.push((j, l.clone())),
                _ => out.push(Step::Command(l.clone())),
            },
            FedInput::Core(Input::EndOfInput) => out.push(Step::EndOfInput),
            FedInput::Core(_) | FedInput::Timer { .. } => {}
        }
        for o in &f.outputs {
            if let Output::Event(e) = o {
                out.push(Step::Event(run.line(e)));
            }
        }
    }
    out.extend(waiting.into_iter().map(|(_, l)| Step::Command(l)));
    out
}

/// Whether input `i` is an `approval_mode`/`reload` whose answer waits for an effect.
fn asks_for(run: &Run, i: usize) -> Option<Deferred> {
    let f = &run.trace[i];
    let FedInput::Core(Input::Line(l)) = &f.input else {
        return None;
    };
    let has = |want: fn(&Effect) -> bool| {
        f.outputs
            .iter()
            .any(|o| matches!(o, Output::Effect(e) if want(e)))
    };
    match Command::parse_line(l) {
        Ok(Some(Command::ApprovalMode { .. })) if has(|e| matches!(e, Effect::SaveMode { .. })) => {
            Some(Deferred::Mode)
        }
        Ok(Some(Command::Reload)) if has(|e| matches!(e, Effect::Refreeze)) => {
            Some(Deferred::Reload)
        }
        _ => None,
    }
}

fn answers_kind(input: &FedInput) -> Option<Deferred> {
    match input {
        FedInput::Core(Input::ModeSaved { .. }) | FedInput::Core(Input::ModeSaveFailed { .. }) => {
            Some(Deferred::Mode)
        }
        FedInput::Core(Input::Frozen { .. }) => Some(Deferred::Reload),
        FedInput::Core(_) | FedInput::Timer { .. } => None,
    }
}
