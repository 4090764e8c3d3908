//! In-process benchmarks of the pure core: token deltas through
//! `Core::handle`/`Core::poll` plus serialization with `Line::write_json`, the stream validator in
//! MB/s over token lines, and transcript capping over a long history.
//!
//! Run: `cargo bench -p openmax-core --bench core` (divan; figures are per iteration, with
//! throughput from the counters: items = deltas or lines, bytes = validated bytes).

use divan::counter::{BytesCount, ItemsCount};
use divan::{black_box, Bencher};

use openmax_core::machine::{Core, CoreConfig, Effect, Freeze, Input, Output};
use openmax_core::provider::ProviderItem;
use openmax_core::validate::stream::StreamValidator;
use openmax_core::wire::{Event, Line, Transcript, TranscriptMessage};
use openmax_core::Millis;

fn main() {
    sanity_check();
    divan::main();
}

/// The benched loop really runs a turn: three deltas give three `token` lines and a `done`.
fn sanity_check() {
    let mut d = Driver::new();
    d.keep = true;
    let (request, attempt) = d.open_turn();
    for _ in 0..3 {
        d.step(
            1,
            Input::Provider {
                request,
                attempt,
                item: ProviderItem::TextDelta {
                    text: DELTA_TEXT.into(),
                },
            },
        );
    }
    d.finish_turn(request, attempt);
    let out = String::from_utf8(d.buf).expect("JSON lines are UTF-8");
    let types: Vec<&str> = out
        .lines()
        .map(|l| {
            let at = l.find("\"type\":\"").expect("every line has a type") + 8;
            let rest = &l[at..];
            &rest[..rest.find('"').expect("the type string ends")]
        })
        .collect();
    assert_eq!(
        types.iter().filter(|t| **t == "token").count(),
        3,
        "three token lines: {out}"
    );
    assert_eq!(
        types.last(),
        Some(&"done"),
        "the turn ends with done: {out}"
    );
}

/// What one streamed delta carries (a typical 1–2 token piece of text).
const DELTA_TEXT: &str = "tok ";

fn freeze() -> Freeze {
    Freeze {
        system: "You are terse.".into(),
        tools: vec![],
        skills: vec![],
        hooks: vec![],
        changes: vec![],
        notes: vec![],
        trusted: None,
    }
}

/// The driver loop of the shell's runtime, minus the I/O: handle one input, drain, write every
/// event as a JSON line into the reused buffer; effects are answered the way the runtime does
/// (a persist is acknowledged at once). Returns the request/attempt of a `SendRequest`.
struct Driver {
    core: Core,
    session_id: String,
    buf: Vec<u8>,
    sent: Option<(u64, u32)>,
    persisted: Vec<u64>,
    /// Keep every line (the sanity check) instead of clearing at each quiet point.
    keep: bool,
}

impl Driver {
    fn new() -> Driver {
        Driver {
            core: Core::new(CoreConfig::new("s-bench-0001", freeze())),
            session_id: "s-bench-0001".into(),
            buf: Vec::with_capacity(8 * 1024),
            sent: None,
            persisted: Vec::new(),
            keep: false,
        }
    }

    fn step(&mut self, now: u64, input: Input) {
        self.core.handle(Millis(now), input);
        while let Some(out) = self.core.poll() {
            match out {
                Output::Event(event) => self.write(event),
                Output::Effect(Effect::SendRequest {
                    request, attempt, ..
                }) => self.sent = Some((request, attempt)),
                Output::Effect(Effect::Persist { ticket, .. }) => self.persisted.push(ticket),
                Output::Effect(_) => {}
            }
        }
        // A quiet point: the runtime writes the buffer to stdout here.
        black_box(&self.buf);
        if !self.keep {
            self.buf.clear();
        }
        while let Some(ticket) = self.persisted.pop() {
            self.step(now, Input::Persisted { ticket });
        }
    }

    /// Exactly what `JsonlSink::event` does: a `Line` (session id cloned) written as JSON.
    fn write(&mut self, event: Event) {
        let line = Line {
            session_id: self.session_id.clone(),
            event,
        };
        line.write_json(&mut self.buf);
        self.buf.push(b'\n');
    }

    /// Open a turn: the user command, then the request opens.
    fn open_turn(&mut self) -> (u64, u32) {
        self.step(0, Input::Line(r#"{"cmd":"user","text":"hi"}"#.into()));
        // The core sends the first request at once for a trusted session with no hooks.
        let (request, attempt) = self.sent.take().expect("the user command sends a request");
        self.step(
            1,
            Input::Provider {
                request,
                attempt,
                item: ProviderItem::Opened,
            },
        );
        (request, attempt)
    }

    fn finish_turn(&mut self, request: u64, attempt: u32) {
        self.step(
            2,
            Input::Provider {
                request,
                attempt,
                item: ProviderItem::Completed {
                    finish_reason: "end_turn".into(),
                },
            },
        );
    }
}

/// One whole turn with `n` text deltas through the core and the JSON writer (a fresh core per
/// iteration; its construction and the user command are part of the timed turn).
#[divan::bench(args = [1, 100, 2000])]
fn turn_with_n_deltas(bencher: Bencher, n: usize) {
    bencher
        .counter(ItemsCount::new(n))
        .with_inputs(Driver::new)
        .bench_local_values(|mut d| {
            let (request, attempt) = d.open_turn();
            for _ in 0..n {
                d.step(
                    1,
                    Input::Provider {
                        request,
                        attempt,
                        item: ProviderItem::TextDelta {
                            text: DELTA_TEXT.into(),
                        },
                    },
                );
            }
            d.finish_turn(request, attempt);
            d
        });
}

/// The steady state: deltas only, in a turn opened outside the timed loop (10,000 per sample).
#[divan::bench]
fn deltas_in_open_turn(bencher: Bencher) {
    const N: usize = 10_000;
    bencher
        .counter(ItemsCount::new(N))
        .with_inputs(|| {
            let mut d = Driver::new();
            let ids = d.open_turn();
            (d, ids)
        })
        .bench_local_values(|(mut d, (request, attempt))| {
            for _ in 0..N {
                d.step(
                    1,
                    Input::Provider {
                        request,
                        attempt,
                        item: ProviderItem::TextDelta {
                            text: DELTA_TEXT.into(),
                        },
                    },
                );
            }
            d
        });
}

/// Serialization alone: one token line into a reused buffer.
#[divan::bench]
fn write_json_token(bencher: Bencher) {
    let line = Line {
        session_id: "s-bench-0001".into(),
        event: Event::Token {
            text: DELTA_TEXT.into(),
        },
    };
    let mut buf = Vec::with_capacity(256);
    let len = {
        line.write_json(&mut buf);
        buf.len() + 1
    };
    bencher.counter(BytesCount::new(len)).bench_local(|| {
        buf.clear();
        black_box(&line).write_json(&mut buf);
        buf.push(b'\n');
        black_box(&buf);
    });
}

/// A valid stream: hello, `tokens` token lines, message_done, done (the `--check` target's
/// input shape).
fn token_stream(tokens: usize) -> Vec<Vec<u8>> {
    let mut lines = Vec::with_capacity(tokens + 3);
    lines.push(br#"{"type":"hello","proto":"openmax-stdio/6","protocol_version":6,"session_id":"s-bench-0001","version":"0.2.0","project":"/tmp/bench","continued":false}"#.to_vec());
    for i in 0..tokens {
        let text = if i % 2 == 0 {
            r#"The quick brown fox jumps over the lazy dog, \"quoted\" and \\ escaped.\n"#
        } else {
            "tok "
        };
        lines.push(
            format!(r#"{{"session_id":"s-bench-0001","type":"token","text":"{text}"}}"#)
                .into_bytes(),
        );
    }
    lines.push(br#"{"session_id":"s-bench-0001","type":"message_done","text":"..."}"#.to_vec());
    lines.push(br#"{"session_id":"s-bench-0001","type":"done","stop_reason":"end_turn"}"#.to_vec());
    lines
}

/// The validator over token lines (100,000 lines per sample), bytes counted with newlines.
#[divan::bench]
fn validate_token_lines(bencher: Bencher) {
    let lines = token_stream(100_000);
    let bytes: usize = lines.iter().map(|l| l.len() + 1).sum();
    bencher.counter(BytesCount::new(bytes)).bench_local(|| {
        let mut v = StreamValidator::new();
        for l in &lines {
            black_box(v.feed(l));
        }
        let end = v.finish();
        assert!(end.is_empty(), "the bench stream is valid: {end:?}");
        black_box(v.violation_count());
    });
}

/// A long history: alternating prompts and replies; every 50th reply is 10,000 characters
/// (over the 4096-character cap), the rest 200.
fn history(n: usize) -> Vec<TranscriptMessage> {
    (0..n)
        .map(|i| TranscriptMessage {
            role: if i % 2 == 0 { "user" } else { "assistant" }.into(),
            content: if i % 100 == 99 {
                "é".repeat(5_000) + &"x".repeat(5_000)
            } else {
                format!("message {i}: ") + &"lorem ipsum ".repeat(16)
            },
        })
        .collect()
}

/// `Transcript::capped` over a long history (the continued session's second line), plus its
/// JSON serialization.
#[divan::bench(args = [1_000, 100_000])]
fn transcript_capped(bencher: Bencher, n: usize) {
    let h = history(n);
    bencher.counter(ItemsCount::new(n)).bench_local(|| {
        let t = Transcript::capped("s-bench-0001", black_box(&h));
        black_box(t.to_json().len())
    });
}
