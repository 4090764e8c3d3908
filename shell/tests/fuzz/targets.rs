//! In-process mutation fuzzing on the stable toolchain: a seeded byte mutator over a corpus of
//! valid inputs per target, and one property per target: no panic, every failure a clear error
//! (a non-empty message), and memory bounded by the input (nothing retained or produced grows
//! past a small multiple of the bytes fed). Shared by the quick test (`tests/fuzz.rs`) and the
//! long runs of `bench/fuzz.sh` (`examples/fuzz.rs`).
//!
//! Targets: stdin framing plus command parsing, the SSE decoder, each provider mapper behind
//! the decoder (arbitrary bytes in arbitrary chunks), the config parser, the session record
//! reader.

use std::path::Path;

use openmax_core::conversation::{Message, ModelRequest};
use openmax_core::machine::Input;
use openmax_core::provider::ProviderItem;
use openmax_core::wire::Command;
use openmax_shell::config::parse_file;
use openmax_shell::frontend::framing::Framer;
use openmax_shell::provider::mapping::StreamMapper;
use openmax_shell::provider::sse::SseDecoder;
use openmax_shell::provider::{anthropic, chat, openai, Provider, ProviderConfig, ProviderKind};
use openmax_shell::session::line::parse_line;
use openmax_sim::mock::{render_stream, RequestFacts};
use openmax_sim::script::{Fault, Flavor, StreamEnd, StreamItem};

/// A small, fast, seeded PRNG (xorshift64*): the same seed gives the same inputs.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A value in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Tokens that tend to reach parser edges: delimiters, escapes, a lone surrogate, bytes that
/// are not UTF-8, SSE field names, line endings, big numbers.
const TOKENS: &[&[u8]] = &[
    b"\"",
    b"{",
    b"}",
    b"[",
    b"]",
    b":",
    b",",
    b"\\",
    b"\\u",
    b"\\ud800",
    b"\\u0000",
    b"\n",
    b"\r",
    b"\r\n",
    b"\n\n",
    b"data: ",
    b"event: ",
    b"id: ",
    b"retry: ",
    b": ping\n",
    b"data: [DONE]\n\n",
    b"\xff",
    b"\xc3",
    b"\xe2\x82",
    b"\xef\xbb\xbf",
    b"null",
    b"true",
    b"-1",
    b"1e999",
    b"18446744073709551616",
    b"0.5",
    b"\0",
    b"=",
    b"[[",
    b"]]",
    b"'''",
    b"\"\"\"",
    b"#",
    b"\"v\":",
    b"\"rec\":",
    b"\"cmd\":",
    b"\"type\":",
    b"\"index\":",
];

/// One mutation of `seed`, drawing splices from `corpus`.
pub fn mutate(rng: &mut Rng, seed: &[u8], corpus: &[Vec<u8>]) -> Vec<u8> {
    let mut v = seed.to_vec();
    for _ in 0..1 + rng.below(6) {
        let len = v.len();
        match rng.below(9) {
            0 if len > 0 => {
                let i = rng.below(len);
                v[i] ^= 1 << rng.below(8);
            }
            1 => {
                let i = rng.below(len + 1);
                v.insert(i, rng.next() as u8);
            }
            2 if len > 0 => {
                let a = rng.below(len);
                let b = (a + 1 + rng.below(16)).min(len);
                v.drain(a..b);
            }
            3 if len > 0 => {
                let a = rng.below(len);
                let b = (a + 1 + rng.below(64)).min(len);
                let piece = v[a..b].to_vec();
                let at = rng.below(v.len() + 1);
                v.splice(at..at, piece);
            }
            4 => {
                let t = TOKENS[rng.below(TOKENS.len())];
                let at = rng.below(len + 1);
                v.splice(at..at, t.iter().copied());
            }
            5 if len > 0 => v.truncate(rng.below(len)),
            6 if !corpus.is_empty() => {
                let other = &corpus[rng.below(corpus.len())];
                if !other.is_empty() {
                    let a = rng.below(other.len());
                    let b = (a + 1 + rng.below(256)).min(other.len());
                    let at = rng.below(len + 1);
                    v.splice(at..at, other[a..b].iter().copied());
                }
            }
            7 if len > 0 => {
                // An ASCII digit or letter replaced: numbers and names change.
                let i = rng.below(len);
                v[i] = b"0123456789azAZ-_."[rng.below(17)];
            }
            _ => {
                let t = TOKENS[rng.below(TOKENS.len())];
                v.extend_from_slice(t);
            }
        }
    }
    v
}

/// `bytes` cut at up to 8 random points.
pub fn chunks<'a>(rng: &mut Rng, bytes: &'a [u8]) -> Vec<&'a [u8]> {
    let mut cuts: Vec<usize> = (0..rng.below(9))
        .map(|_| rng.below(bytes.len() + 1))
        .collect();
    cuts.sort_unstable();
    let mut out = Vec::new();
    let mut start = 0;
    for c in cuts.into_iter().chain([bytes.len()]) {
        out.push(&bytes[start..c]);
        start = c;
    }
    out
}

/// One fuzz target: its name, its seed corpus, and the property checked on one input.
pub struct Target {
    pub name: &'static str,
    pub corpus: Vec<Vec<u8>>,
    pub check: fn(&mut Rng, &[u8]) -> Result<(), String>,
}

/// Every target with its corpus.
pub fn targets() -> Vec<Target> {
    vec![
        Target {
            name: "stdin framing + commands",
            corpus: command_corpus(),
            check: check_stdin,
        },
        Target {
            name: "sse decoder",
            corpus: [Flavor::Anthropic, Flavor::Openai, Flavor::OpenaiChat]
                .into_iter()
                .flat_map(stream_corpus)
                .collect(),
            check: check_sse,
        },
        Target {
            name: "anthropic mapper",
            corpus: stream_corpus(Flavor::Anthropic),
            check: |r, b| check_mapper(Flavor::Anthropic, r, b),
        },
        Target {
            name: "openai responses mapper",
            corpus: stream_corpus(Flavor::Openai),
            check: |r, b| check_mapper(Flavor::Openai, r, b),
        },
        Target {
            name: "openai chat mapper",
            corpus: stream_corpus(Flavor::OpenaiChat),
            check: |r, b| check_mapper(Flavor::OpenaiChat, r, b),
        },
        Target {
            name: "config parser",
            corpus: config_corpus(),
            check: check_config,
        },
        Target {
            name: "session record reader",
            corpus: record_corpus(),
            check: check_record,
        },
    ]
}

fn command_corpus() -> Vec<Vec<u8>> {
    [
        r#"{"cmd":"user","text":"hello"}"#,
        r#"{"cmd":"cancel"}"#,
        r#"{"cmd":"quit"}"#,
        r#"{"cmd":"approve","approval_id":"a1","approved":true}"#,
        r#"{"cmd":"approval_mode","mode":"readonly"}"#,
        r#"{"cmd":"reload"}"#,
        r#"{"cmd":"user","text":"a\nb \u00e9 \ud83d\ude00","extra":[1,2,{"x":null}]}"#,
    ]
    .iter()
    .map(|l| format!("{l}\n{l}\n").into_bytes())
    .collect()
}

/// Streams the mock would send, in `flavor`'s format: text, thinking, tool calls, usage,
/// completed, failed in-stream, ended without completion, damaged.
fn stream_corpus(flavor: Flavor) -> Vec<Vec<u8>> {
    let kind = match flavor {
        Flavor::Anthropic => ProviderKind::Anthropic,
        Flavor::Openai => ProviderKind::Openai,
        Flavor::OpenaiChat => ProviderKind::OpenaiChat,
    };
    let provider = Provider::new(ProviderConfig::defaults(kind)).expect("provider");
    let body = provider.build_body(&ModelRequest {
        system: "s".into(),
        tools: vec![],
        messages: vec![Message::user_text("u")],
    });
    let facts = RequestFacts::from_body(1, &body, body.to_string().len());
    let text = |t: &str| StreamItem::Text { text: t.into() };
    let scripts = [
        (
            vec![text("Hello, "), text("wörld ☃")],
            StreamEnd::Complete { finish: None },
        ),
        (
            vec![
                StreamItem::Thinking { text: "hmm".into() },
                text("ok"),
                StreamItem::ToolCall {
                    id: "c1".into(),
                    name: "read_file".into(),
                    args: serde_json::json!({"path": "a b/c.txt", "n": [1, 2.5, null]}),
                },
                StreamItem::ToolCall {
                    id: "c2".into(),
                    name: "shell".into(),
                    args: serde_json::json!({"command": "ls \"x\""}),
                },
                StreamItem::Usage {
                    prompt_tokens: 10,
                    completion_tokens: 5,
                    cached_tokens: Some(3),
                },
            ],
            StreamEnd::Complete { finish: None },
        ),
        (
            vec![text("partial")],
            StreamEnd::Error {
                error: "overloaded_error".into(),
                message: "Overloaded".into(),
            },
        ),
        (
            vec![text("cut")],
            StreamEnd::Complete {
                finish: Some("length".into()),
            },
        ),
        (vec![text("no end")], StreamEnd::CleanEof),
        (
            vec![StreamItem::Corrupt {
                of: Box::new(text("damaged")),
                fault: Fault::CutJson,
            }],
            StreamEnd::Complete { finish: None },
        ),
    ];
    scripts
        .iter()
        .map(|(items, end)| render_stream(flavor, &facts, items, end).concat())
        .collect()
}

fn config_corpus() -> Vec<Vec<u8>> {
    [
        "[provider]\nname = \"anthropic\"\nmodel = \"m\"\nmax_attempts = 5\nretry_base_ms = 200\n\
         stream_idle_timeout_s = 0.25\n\n[limits]\nmax_iterations = 50\nmax_reply_bytes = 4194304\n\
         drain_timeout_s = 10\n\n[permissions]\ndeny = [\"shell(rm -rf *)\"]\nask = [\"shell(git push*)\"]\n",
        "[[hooks]]\nevent = \"turn_end\"\ncommand = [\"./check.sh\"]\nblocking = true\n",
        "[sandbox]\nnetwork = false\nenv_deny = [\"AWS_*\"]\n",
        "[provider]\nname = \"openai-chat\"\nbase_url = \"http://127.0.0.1:1/v1\"\n",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect()
}

fn record_corpus() -> Vec<Vec<u8>> {
    use openmax_core::conversation::Block;
    use openmax_core::record::{Record, RecordLine};
    let reply = Message {
        role: openmax_core::conversation::Role::Assistant,
        content: vec![
            Block::text("ok \u{e9}"),
            Block::ToolUse {
                id: "c1".into(),
                name: "read_file".into(),
                input: serde_json::json!({"path": "a"}),
            },
        ],
    };
    [
        Record::Session {
            session_id: "abc".into(),
            project: "/p".into(),
            system: "You are".into(),
            tools: vec![],
        },
        Record::Message {
            message: Message::user_text("hi"),
        },
        Record::Message { message: reply },
        Record::Compaction {
            messages: vec![Message::user_text("summary")],
            tokens_before: 100,
            tokens_after: 10,
            compacted_messages: 3,
        },
        Record::TurnEnd {
            stop_reason: "end_turn".into(),
            turn: None,
        },
    ]
    .into_iter()
    .map(|r| RecordLine::new(r).to_json().into_bytes())
    .collect()
}

/// Stdin framing with a 4 KiB cap: every line is framed or reported, the framer never holds
/// more than the cap plus one chunk, and each framed line parses or names its fault.
fn check_stdin(rng: &mut Rng, bytes: &[u8]) -> Result<(), String> {
    const CAP: usize = 4096;
    let mut framer = Framer::with_cap(CAP);
    let mut out = Vec::new();
    for c in chunks(rng, bytes) {
        framer.push(c, &mut out);
        if framer.held_capacity() > 2 * CAP.max(c.len()) + 64 * 1024 {
            return Err(format!("framer holds {} bytes", framer.held_capacity()));
        }
    }
    framer.finish(&mut out);
    if !matches!(out.last(), Some(Input::EndOfInput)) {
        return Err("no EndOfInput after finish".into());
    }
    for input in &out {
        if let Input::Line(l) = input {
            if l.len() > CAP {
                return Err(format!("a {} byte line passed the {CAP} cap", l.len()));
            }
            match Command::parse_line(l) {
                Ok(_) => {}
                Err(e) if e.to_string().is_empty() => return Err("empty command error".into()),
                Err(_) => {}
            }
        }
    }
    Ok(())
}

/// The SSE decoder: the events do not depend on the chunking, and hold no more data than fed.
fn check_sse(rng: &mut Rng, bytes: &[u8]) -> Result<(), String> {
    let decode = |parts: &[&[u8]]| {
        let mut dec = SseDecoder::new();
        let mut evs = Vec::new();
        for p in parts {
            evs.extend(dec.feed(p));
        }
        evs.extend(dec.finish());
        evs
    };
    let whole = decode(&[bytes]);
    let split = decode(&chunks(rng, bytes));
    if whole != split {
        return Err("the events depend on where the body was split".into());
    }
    let data: usize = whole.iter().map(|e| e.data.len()).sum();
    // U+FFFD replaces each bad byte with three: the only way data outgrows its input.
    if data > 3 * bytes.len() {
        return Err(format!(
            "{data} bytes of data from {} input bytes",
            bytes.len()
        ));
    }
    Ok(())
}

/// A mapper behind the decoder: exactly one terminal item, nothing after it, every failure with
/// a message, no more text than the input carried.
fn check_mapper(flavor: Flavor, rng: &mut Rng, bytes: &[u8]) -> Result<(), String> {
    let mut m: Box<dyn StreamMapper> = match flavor {
        Flavor::Anthropic => Box::new(anthropic::AnthropicMapper::new()),
        Flavor::Openai => Box::new(openai::OpenaiMapper::new()),
        Flavor::OpenaiChat => Box::new(chat::ChatMapper::new()),
    };
    let mut dec = SseDecoder::new();
    let mut items = Vec::new();
    for c in chunks(rng, bytes) {
        for ev in dec.feed(c) {
            items.extend(m.on_event(&ev));
        }
    }
    if rng.below(4) == 0 {
        items.extend(m.on_body_error("connection reset"));
    } else {
        for ev in dec.finish() {
            items.extend(m.on_event(&ev));
        }
        items.extend(m.on_eof());
    }
    let terminal = items
        .iter()
        .position(openmax_shell::provider::mapping::is_terminal);
    match terminal {
        None => return Err(format!("no terminal item: {items:?}")),
        Some(i) if i + 1 != items.len() => return Err(format!("items after the end: {items:?}")),
        Some(_) => {}
    }
    let mut produced = 0;
    for it in &items {
        match it {
            ProviderItem::Failed { message, .. } if message.is_empty() => {
                return Err("a failure with no message".into())
            }
            ProviderItem::EndedWithoutCompletion { detail } if detail.is_empty() => {
                return Err("an unfinished stream with no detail".into())
            }
            ProviderItem::TextDelta { text } | ProviderItem::ThinkingDelta { text } => {
                produced += text.len()
            }
            ProviderItem::ToolCallArgs { json, .. } => produced += json.len(),
            _ => {}
        }
    }
    if produced > 3 * bytes.len() + 64 {
        return Err(format!(
            "{produced} bytes of content from {} input bytes",
            bytes.len()
        ));
    }
    Ok(())
}

/// The config parser: the text parses or the error names the file.
fn check_config(_rng: &mut Rng, bytes: &[u8]) -> Result<(), String> {
    let text = String::from_utf8_lossy(bytes);
    let path = Path::new("/fuzz/config.toml");
    for project in [false, true] {
        if let Err(e) = parse_file(path, &text, project) {
            if !e.0.contains("/fuzz/config.toml") {
                return Err(format!("the error does not name the file: {}", e.0));
            }
        }
    }
    Ok(())
}

/// The session record reader: a line parses or the error says why.
fn check_record(_rng: &mut Rng, bytes: &[u8]) -> Result<(), String> {
    match parse_line(bytes) {
        Ok(_) => Ok(()),
        Err(e) if e.message().is_empty() => Err("an empty record error".into()),
        Err(_) => Ok(()),
    }
}

/// What one run of a target found.
pub struct Report {
    pub inputs: u64,
    pub failures: Vec<String>,
}

/// Run `target` for `inputs` mutated inputs from `seed`; a panic is caught and reported with
/// the input that caused it.
pub fn run(target: &Target, inputs: u64, seed: u64) -> Report {
    let mut rng = Rng::new(seed);
    let mut failures = Vec::new();
    let mut pool: Vec<Vec<u8>> = target.corpus.clone();
    for n in 0..inputs {
        let base = &pool[rng.below(pool.len())];
        let input = mutate(&mut rng, base, &target.corpus);
        let mut inner = Rng::new(rng.next());
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            (target.check)(&mut inner, &input)
        }));
        let why = match outcome {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e),
            Err(p) => Some(format!(
                "panic: {}",
                p.downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default()
            )),
        };
        if let Some(why) = why {
            if failures.len() < 5 {
                failures.push(format!(
                    "{}: {why}\n  input: {:?}",
                    target.name,
                    String::from_utf8_lossy(&input)
                ));
            }
        }
        // Keep a few mutants as new bases (bounded pool), so mutations compound.
        if n % 16 == 0 && input.len() < 64 * 1024 {
            if pool.len() < 256 {
                pool.push(input);
            } else {
                let i = rng.below(pool.len());
                pool[i] = input;
            }
        }
    }
    Report { inputs, failures }
}
