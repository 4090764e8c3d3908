//! What one scenario run produced: every input fed to the core with the outputs drained right
//! after it ([`Fed`]), the model requests sent and the scripts that answered them ([`Sent`]),
//! and the views the checks and the `run` command read (the wire, the interleaved stdin/stdout
//! record, a readable listing).
//!
//! Invariant: a [`Run`] is plain data filled in by [`crate::driver`]; every view here is a pure
//! function of it, so the same run always prints the same wire and listing.

use std::collections::BTreeSet;

use openmax_core::machine::{Effect, Input, Output, TimerReason};
use openmax_core::provider::RequestId;
use openmax_core::wire::{Event, Line};
use openmax_core::Millis;

use crate::script::Reply;

/// What was fed to the core at one point.
#[derive(Debug, Clone, PartialEq)]
pub enum FedInput {
    /// An input of the core, as fed.
    Core(Input),
    /// A timer the core asked for fired (`deadline` is what `poll_timeout` said).
    Timer {
        deadline: Millis,
        reason: TimerReason,
    },
}

/// One input fed and everything the core emitted when drained right after it.
#[derive(Debug, Clone, PartialEq)]
pub struct Fed {
    pub at: Millis,
    pub input: FedInput,
    pub outputs: Vec<Output>,
}

/// One `SendRequest` and the script that answered it.
#[derive(Debug, Clone, PartialEq)]
pub struct Sent {
    pub at: Millis,
    pub request: RequestId,
    pub attempt: u32,
    /// Index into the scenario's `replies`, `None` for the default reply.
    pub reply: Option<usize>,
    pub script: Reply,
}

/// One line of the interleaved record: a stdin line in, or a stdout line out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordLine {
    /// A stdin line as the client wrote it.
    In(String),
    /// A stdin line the shell could not frame (described).
    InFault(String),
    /// stdin ended.
    InEof,
    /// A stdout line.
    Out(String),
}

/// Everything one scenario run produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    pub session_id: String,
    /// The `hello` line.
    pub hello: String,
    /// Every input fed, in order, with its outputs.
    pub trace: Vec<Fed>,
    /// The `Exit` effect's code, when the session ended.
    pub exit_code: Option<i32>,
    /// Problems the driver itself found (step cap, a timer that never advances, bad config).
    pub violations: Vec<String>,
    /// Every model request attempt sent, with its script.
    pub sends: Vec<Sent>,
    /// Call ids delivered to the core by a stream whose completion signal was also delivered.
    pub completed_calls: BTreeSet<String>,
    /// Call ids delivered to the core by any stream.
    pub streamed_calls: BTreeSet<String>,
    /// `poll_timeout` when the run ended.
    pub final_timeout: Option<(Millis, TimerReason)>,
    /// Whether the run ended because nothing more was due (not the step cap, not an exit).
    pub went_quiet: bool,
    /// Trace indices of drains that emitted a `done` after which the core still reported a
    /// turn in flight with no new turn started (checked by the driver after every drain).
    pub in_turn_after_done: Vec<usize>,
    /// The session was non-interactive (`-p`): its first `done` ends its input.
    pub non_interactive: bool,
}

impl Run {
    /// The stdout lines: hello, then every event.
    pub fn wire(&self) -> Vec<String> {
        let mut out = vec![self.hello.clone()];
        out.extend(self.events().map(|(_, e)| self.line(e)));
        out
    }

    /// The wire as one text, a newline after each line (the golden file format).
    pub fn wire_text(&self) -> String {
        let mut s = String::new();
        for l in self.wire() {
            s.push_str(&l);
            s.push('\n');
        }
        s
    }

    /// Serialize an event as the shell would write it.
    pub fn line(&self, e: &Event) -> String {
        Line {
            session_id: self.session_id.clone(),
            event: e.clone(),
        }
        .to_json()
    }

    /// Every event with the index of the fed input that produced it.
    pub fn events(&self) -> impl Iterator<Item = (usize, &Event)> {
        self.trace.iter().enumerate().flat_map(|(i, f)| {
            f.outputs.iter().filter_map(move |o| match o {
                Output::Event(e) => Some((i, e)),
                Output::Effect(_) => None,
            })
        })
    }

    /// Every effect with the index of the fed input that produced it.
    pub fn effects(&self) -> impl Iterator<Item = (usize, &Effect)> {
        self.trace.iter().enumerate().flat_map(|(i, f)| {
            f.outputs.iter().filter_map(move |o| match o {
                Output::Effect(e) => Some((i, e)),
                Output::Event(_) => None,
            })
        })
    }

    /// Stdin and stdout interleaved in the order they happened (for the pairing checker).
    pub fn record(&self) -> Vec<RecordLine> {
        let mut out = vec![RecordLine::Out(self.hello.clone())];
        for f in &self.trace {
            match &f.input {
                FedInput::Core(Input::Line(l)) => out.push(RecordLine::In(l.clone())),
                FedInput::Core(Input::Framing(fault)) => {
                    out.push(RecordLine::InFault(format!("{fault:?}")))
                }
                FedInput::Core(Input::EndOfInput) => out.push(RecordLine::InEof),
                FedInput::Core(_) | FedInput::Timer { .. } => {}
            }
            for o in &f.outputs {
                if let Output::Event(e) = o {
                    out.push(RecordLine::Out(self.line(e)));
                }
            }
        }
        out
    }

    /// A readable listing: time, input, then each output (the `run` command's verbose form).
    pub fn listing(&self) -> String {
        let mut s = format!("{}\n", self.hello);
        for f in &self.trace {
            s.push_str(&format!("@{:>7} <- {}\n", f.at.0, describe_input(&f.input)));
            for o in &f.outputs {
                match o {
                    Output::Event(e) => s.push_str(&format!("          {}\n", self.line(e))),
                    Output::Effect(e) => {
                        s.push_str(&format!("          ! {}\n", describe_effect(e)))
                    }
                }
            }
        }
        s
    }
}

/// One short line describing a fed input.
pub fn describe_input(i: &FedInput) -> String {
    match i {
        FedInput::Core(Input::Line(l)) => format!("stdin {l}"),
        FedInput::Timer { deadline, reason } => format!("timer {reason:?} (due {})", deadline.0),
        FedInput::Core(other) => {
            let s = format!("{other:?}");
            if s.len() > 200 {
                let mut cut = 200;
                while !s.is_char_boundary(cut) {
                    cut -= 1;
                }
                format!("{}…", &s[..cut])
            } else {
                s
            }
        }
    }
}

/// One short line describing an effect (request bodies elided).
pub fn describe_effect(e: &Effect) -> String {
    match e {
        Effect::SendRequest {
            request, attempt, ..
        } => format!("SendRequest {{ request: {request}, attempt: {attempt} }}"),
        Effect::Persist { ticket, records } => {
            format!("Persist {{ ticket: {ticket}, records: {} }}", records.len())
        }
        other => format!("{other:?}"),
    }
}
