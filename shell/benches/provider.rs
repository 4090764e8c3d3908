//! In-process benchmarks of the provider stream path: the SSE decoder alone,
//! and the decoder plus each API's mapper (Anthropic Messages, OpenAI Responses, Chat
//! Completions), over the exact bytes the loopback mock sends for a 2000-delta reply
//! (`openmax_sim::mock::render_stream`), fed in the chunks the mock writes (one per delta).
//! Also `--check`'s in-process path (`openmax_shell::oneshot::check::run`) over token lines.
//!
//! Run: `cargo bench -p openmax-shell --bench provider` (divan; throughput in bytes/s and in
//! deltas/s).

use divan::counter::{BytesCount, ItemsCount};
use divan::{black_box, Bencher};

use openmax_core::provider::ProviderItem;
use openmax_shell::provider::anthropic::AnthropicMapper;
use openmax_shell::provider::chat::ChatMapper;
use openmax_shell::provider::mapping::StreamMapper;
use openmax_shell::provider::openai::OpenaiMapper;
use openmax_shell::provider::sse::SseDecoder;
use openmax_sim::mock::{render_stream, RequestFacts, Tail};
use openmax_sim::script::{Flavor, StreamEnd, StreamItem};

/// Deltas in the benched reply.
const DELTAS: usize = 2000;

const FLAVORS: [&str; 3] = ["anthropic", "openai", "openai-chat"];

fn main() {
    for name in FLAVORS {
        let s = Stream::new(name);
        let (items, deltas) = s.decode_and_map();
        assert_eq!(deltas, DELTAS, "{name}: every delta is mapped");
        assert!(
            matches!(items.last(), Some(ProviderItem::Completed { .. })),
            "{name}: the stream completes"
        );
        println!(
            "{name}: {} bytes in {} chunks for {DELTAS} deltas ({:.0} bytes/delta)",
            s.bytes(),
            s.chunks.len(),
            s.bytes() as f64 / DELTAS as f64
        );
    }
    divan::main();
}

fn flavor(name: &str) -> Flavor {
    match name {
        "anthropic" => Flavor::Anthropic,
        "openai" => Flavor::Openai,
        "openai-chat" => Flavor::OpenaiChat,
        other => panic!("unknown flavor {other}"),
    }
}

fn mapper(name: &str) -> Box<dyn StreamMapper> {
    match name {
        "anthropic" => Box::new(AnthropicMapper::new()),
        "openai" => Box::new(OpenaiMapper::new()),
        "openai-chat" => Box::new(ChatMapper::new()),
        other => panic!("unknown flavor {other}"),
    }
}

/// One rendered reply, as the chunks the mock writes.
struct Stream {
    name: &'static str,
    chunks: Vec<Vec<u8>>,
}

impl Stream {
    fn new(name: &'static str) -> Stream {
        let facts = RequestFacts {
            seq: 1,
            model: "mock-model".into(),
            body_len: 1000,
            include_usage: true,
            encrypted_reasoning: false,
        };
        let items: Vec<StreamItem> = (0..DELTAS)
            .map(|_| StreamItem::Text {
                text: "tok ".into(),
            })
            .collect();
        let r = render_stream(
            flavor(name),
            &facts,
            &items,
            &StreamEnd::Complete { finish: None },
        );
        let mut chunks = vec![r.prelude.to_vec()];
        chunks.extend(r.steps.iter().map(|s| s.to_vec()));
        match r.tail {
            Tail::End(b) => chunks.push(b.to_vec()),
            Tail::Abort | Tail::Stall | Tail::Endless { .. } => {
                panic!("a completed script ends the body")
            }
        }
        Stream { name, chunks }
    }

    fn bytes(&self) -> usize {
        self.chunks.iter().map(Vec::len).sum()
    }

    /// Exactly the loop of `provider::http::run_attempt`: feed, map every event, then finish.
    fn decode_and_map(&self) -> (Vec<ProviderItem>, usize) {
        let mut sse = SseDecoder::new();
        let mut m = mapper(self.name);
        let mut last = Vec::new();
        let mut deltas = 0;
        let mut take = |items: Vec<ProviderItem>| {
            for item in items {
                if matches!(item, ProviderItem::TextDelta { .. }) {
                    deltas += 1;
                }
                last.push(item);
                if last.len() > 4 {
                    last.remove(0);
                }
            }
        };
        for chunk in &self.chunks {
            for ev in sse.feed(chunk) {
                take(m.on_event(&ev));
            }
        }
        for ev in sse.finish() {
            take(m.on_event(&ev));
        }
        take(m.on_eof());
        (last, deltas)
    }
}

/// The SSE decoder alone over one reply.
#[divan::bench(args = FLAVORS)]
fn sse_decode(bencher: Bencher, name: &'static str) {
    let s = Stream::new(name);
    bencher
        .counter(BytesCount::new(s.bytes()))
        .counter(ItemsCount::new(DELTAS))
        .bench_local(|| {
            let mut sse = SseDecoder::new();
            let mut n = 0;
            for chunk in &s.chunks {
                n += black_box(sse.feed(chunk)).len();
            }
            n + sse.finish().len()
        });
}

/// Decoder plus the API's mapper over one reply (what a provider task does per byte).
#[divan::bench(args = FLAVORS)]
fn sse_decode_and_map(bencher: Bencher, name: &'static str) {
    let s = Stream::new(name);
    bencher
        .counter(BytesCount::new(s.bytes()))
        .counter(ItemsCount::new(DELTAS))
        .bench_local(|| black_box(s.decode_and_map()));
}

/// A valid stream of `tokens` token lines, as `--check --stdio` reads it.
fn check_input(tokens: usize) -> Vec<u8> {
    let mut out = br#"{"type":"hello","proto":"openmax-stdio/6","protocol_version":6,"session_id":"s-bench-0001","version":"0.2.0","project":"/tmp/bench","continued":false}"#.to_vec();
    out.push(b'\n');
    for i in 0..tokens {
        let text = if i % 2 == 0 {
            r#"The quick brown fox jumps over the lazy dog, \"quoted\" and \\ escaped.\n"#
        } else {
            "tok "
        };
        out.extend_from_slice(
            format!("{{\"session_id\":\"s-bench-0001\",\"type\":\"token\",\"text\":\"{text}\"}}\n")
                .as_bytes(),
        );
    }
    out.extend_from_slice(
        b"{\"session_id\":\"s-bench-0001\",\"type\":\"message_done\",\"text\":\"...\"}\n\
          {\"session_id\":\"s-bench-0001\",\"type\":\"done\",\"stop_reason\":\"end_turn\"}\n",
    );
    out
}

/// `--check`'s whole in-process path (line reader, validator, report) over 100,000 lines.
#[divan::bench]
fn check_run_token_lines(bencher: Bencher) {
    let input = check_input(100_000);
    bencher
        .counter(BytesCount::new(input.len()))
        .bench_local(|| {
            let code = openmax_shell::oneshot::check::run(black_box(&input[..]), std::io::sink());
            assert_eq!(code, 0, "the bench stream is valid");
        });
}
