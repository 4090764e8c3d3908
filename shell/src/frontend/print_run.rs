//! The sink of a `-p` run: the output format, the [`Tally`], and the `--output-schema` retry.
//!
//! - `text`: [`PrintSink`] (reply on stdout as it streams, notices on stderr); with a schema,
//!   the reply is not streamed and stdout is the validated JSON, printed at the end.
//! - `json`: [`PrintSink`] with the reply hidden (notices still on stderr), then one object on
//!   stdout at the end ([`super::print_result`]).
//! - `stream-json`: [`JsonlSink`], exactly the `--stdio` event lines (the caller writes
//!   `hello` first); stderr gets only the end-of-run diagnostics (declined calls, the schema's
//!   verdict).
//!
//! With a schema the core leaves the input to this sink (`driver_ends_input`): at the first
//! turn's `done` it checks the answer and either ends the input, or sends one follow-up
//! `user` turn carrying the validator's messages; at the second `done` it ends the input.
//!
//! The exit code ([`PrintRun::finish`]): the core's one-shot code when the turn did not end
//! normally (1 or 4); else [`exit::DECLINED`] when a call was declined for want of a human;
//! else [`exit::SCHEMA`] when the answer is still not valid; else 0.

use std::io::Write;

use openmax_core::machine::Input;
use openmax_core::usage::Prices;
use openmax_core::wire::{Command, Event};

use super::output_schema::{OutputSchema, Verdict};
use super::print_result;
use super::tally::{declined_note, Tally};
use super::{JsonlSink, PrintSink};
use crate::exit;
use crate::run::InputTx;
use crate::run::Sink;

/// `-p --output-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum OutputFormat {
    /// The reply as it streams; notices on stderr.
    #[default]
    Text,
    /// One JSON object at the end (docs/print.md lists its fields).
    Json,
    /// The `--stdio` event lines (hello first), each valid for `openmax --check --stdio`.
    StreamJson,
}

/// Where the events go.
enum Out<O: Write, E: Write> {
    Text(PrintSink<O, E>),
    Stream { sink: JsonlSink<O>, err: E },
}

impl<O: Write, E: Write> Out<O, E> {
    /// The stdout writer back, everything written flushed.
    fn into_stdout(self) -> O {
        match self {
            Out::Text(mut s) => {
                s.flush();
                s.into_inner().0
            }
            Out::Stream { mut sink, .. } => {
                sink.flush();
                sink.into_inner()
            }
        }
    }

    fn note(&mut self, line: &str) {
        match self {
            Out::Text(s) => s.note(line),
            Out::Stream { sink, err } => {
                sink.flush();
                let _ = writeln!(err, "{line}");
            }
        }
    }
}

/// The `-p` sink.
pub struct PrintRun<O: Write, E: Write> {
    format: OutputFormat,
    out: Out<O, E>,
    tally: Tally,
    schema: Option<OutputSchema>,
    verdict: Verdict,
    /// Answers checked so far (the second invalid one is final).
    checks: u32,
    tx: Option<InputTx>,
    session_id: String,
}

impl<O: Write, E: Write> PrintRun<O, E> {
    /// A sink for `format` writing to `out` (stdout) and `err` (stderr).
    pub fn new(
        format: OutputFormat,
        session_id: &str,
        out: O,
        err: E,
        schema: Option<OutputSchema>,
    ) -> PrintRun<O, E> {
        let sink = match format {
            OutputFormat::Text if schema.is_none() => Out::Text(PrintSink::new(out, err)),
            OutputFormat::Text | OutputFormat::Json => {
                Out::Text(PrintSink::new(out, err).hide_reply())
            }
            OutputFormat::StreamJson => Out::Stream {
                sink: JsonlSink::new(session_id, out),
                err,
            },
        };
        PrintRun {
            format,
            out: sink,
            tally: Tally::default(),
            schema,
            verdict: Verdict::Unchecked,
            checks: 0,
            tx: None,
            session_id: session_id.to_string(),
        }
    }

    /// Where a schema run sends its follow-up turn and the end of input.
    pub fn set_sender(&mut self, tx: InputTx) {
        self.tx = Some(tx);
    }

    /// Write a raw line on stdout before any event (`hello`, `transcript` for stream-json).
    pub fn raw_line(&mut self, json: &str) {
        if let Out::Stream { sink, .. } = &mut self.out {
            sink.raw_line(json);
        }
    }

    /// What the session's subagents used, read off its task board once the run is over.
    pub fn add_children(&mut self, children: crate::tasks::progress::Children) {
        self.tally.children = children;
    }

    /// What the run added up.
    pub fn tally(&self) -> &Tally {
        &self.tally
    }

    /// The schema's verdict.
    pub fn verdict(&self) -> &Verdict {
        &self.verdict
    }

    fn send(&self, input: Input) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(input);
        }
    }

    /// A turn ended: check the answer and end the input or ask once more.
    fn after_done(&mut self) {
        let Some(schema) = &self.schema else {
            return;
        };
        let normal = self
            .tally
            .stop_reason
            .as_ref()
            .is_some_and(|s| s.print_exit_code() == 0);
        if !normal {
            self.verdict = Verdict::Unchecked;
            return self.send(Input::EndOfInput);
        }
        self.checks += 1;
        match schema.check(&self.tally.last_reply) {
            Ok(v) => {
                self.verdict = Verdict::Valid(v);
                self.send(Input::EndOfInput);
            }
            Err(errors) if self.checks == 1 => {
                let retry = schema.retry_prompt(&errors);
                let line = format!(
                    "openmax: the answer is not valid against {} ({}); asking once more",
                    schema.path().display(),
                    errors.join("; ")
                );
                self.verdict = Verdict::Invalid(errors);
                self.out.note(&line);
                self.send(Input::Line(Command::User { text: retry }.to_line()));
            }
            Err(errors) => {
                self.verdict = Verdict::Invalid(errors);
                self.send(Input::EndOfInput);
            }
        }
    }

    /// The run is over with the core's exit code `core_code`: print what the format prints
    /// at the end, and return the process's exit code.
    pub fn finish(mut self, core_code: i32, prices: Option<&Prices>) -> i32 {
        self.flush();
        let code = self.exit_code(core_code);
        if let Out::Stream { .. } = self.out {
            for d in self.tally.declined.clone() {
                self.out.note(&declined_note(&d));
            }
        }
        if code == exit::DECLINED {
            let n = self.tally.declined.len();
            self.out.note(&format!(
                "openmax: {n} call{} declined for want of a human's approval (exit {code})",
                if n == 1 { " was" } else { "s were" }
            ));
        }
        if let (Some(schema), Verdict::Invalid(errors)) = (&self.schema, &self.verdict) {
            let line = format!(
                "openmax: the answer is still not valid against {} after asking once more \
                 ({}); the answer was: {}",
                schema.path().display(),
                errors.join("; "),
                clip(&self.tally.last_reply, 2000)
            );
            self.out.note(&line);
        }
        let verdict = self.schema.is_some().then_some(&self.verdict);
        let last = match (self.format, verdict) {
            (OutputFormat::Json, _) => Some(print_result::object(
                &self.session_id,
                &self.tally,
                code,
                prices,
                verdict,
            )),
            (OutputFormat::Text, Some(Verdict::Valid(v))) => Some(v.clone()),
            (OutputFormat::Text | OutputFormat::StreamJson, _) => None,
        };
        let mut out = self.out.into_stdout();
        if let Some(v) = last {
            let _ = writeln!(out, "{v}");
            let _ = out.flush();
        }
        code
    }

    fn exit_code(&self, core_code: i32) -> i32 {
        if core_code != exit::OK {
            core_code
        } else if !self.tally.declined.is_empty() {
            exit::DECLINED
        } else if matches!(self.verdict, Verdict::Invalid(_)) {
            exit::SCHEMA
        } else {
            exit::OK
        }
    }
}

fn clip(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &s[..cut]),
        None => s.to_string(),
    }
}

impl<O: Write, E: Write> Sink for PrintRun<O, E> {
    fn event(&mut self, event: Event) {
        self.tally.observe(&event);
        let done = matches!(event, Event::Done { .. });
        match &mut self.out {
            Out::Text(s) => s.event(event),
            Out::Stream { sink, .. } => sink.event(event),
        }
        if done {
            self.after_done();
        }
    }

    fn flush(&mut self) {
        match &mut self.out {
            Out::Text(s) => s.flush(),
            Out::Stream { sink, err } => {
                sink.flush();
                let _ = err.flush();
            }
        }
    }

    fn buffered_bytes(&self) -> usize {
        match &self.out {
            Out::Text(s) => s.buffered_bytes(),
            Out::Stream { sink, .. } => sink.buffered_bytes(),
        }
    }

    fn client_gone(&self) -> bool {
        match &self.out {
            Out::Text(s) => s.client_gone(),
            Out::Stream { sink, .. } => sink.client_gone(),
        }
    }
}
