//! The loopback mock provider, standalone, for the end-to-end bench (`bench/e2e.py`): serves
//! every model request (any of the three APIs, chosen by the path) the same scripted reply, a
//! text stream of N deltas with D ms between them, forever.
//!
//! Usage: `bench_mock --addr 127.0.0.1:PORT [--deltas N] [--delay-ms D] [--text S]`
//! (defaults: 1 delta, no delay, text `"ok "`; `{i}` in the text becomes the delta's 1-based
//! number). Binds loopback only; runs until killed.
//!
//! `bench_mock --dump FLAVOR [--deltas N] [--text S]` instead prints the rendered stream of
//! that flavor (`anthropic`, `openai`, `openai-chat`) as one JSON object `{"prelude": …,
//! "steps": […], "tail": …}` and exits, so the bench's own timestamping mock sends the very
//! same bytes.
//!
//! Run: `cargo run --release -p openmax-sim --example bench_mock -- --addr 127.0.0.1:8788`

use std::net::SocketAddr;
use std::process::ExitCode;

use openmax_sim::mock::{render_stream, serve_forever, RequestFacts, Tail};
use openmax_sim::script::{Flavor, Reply, StreamEnd, StreamItem};

const USAGE: &str = "usage: bench_mock --addr 127.0.0.1:PORT [--deltas N] [--delay-ms D] [--text S]
       bench_mock --dump anthropic|openai|openai-chat [--deltas N] [--text S]";

fn main() -> ExitCode {
    let mut addr: Option<SocketAddr> = None;
    let mut deltas: usize = 1;
    let mut delay_ms: u64 = 0;
    let mut text = String::from("ok ");
    let mut dump: Option<Flavor> = None;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next();
        let parsed = match (flag.as_str(), value) {
            ("--addr", Some(v)) => v.parse().map(|a| addr = Some(a)).map_err(|e| e.to_string()),
            ("--deltas", Some(v)) => v.parse().map(|n| deltas = n).map_err(|e| e.to_string()),
            ("--delay-ms", Some(v)) => v.parse().map(|d| delay_ms = d).map_err(|e| e.to_string()),
            ("--text", Some(v)) => {
                text = v;
                Ok(())
            }
            ("--dump", Some(v)) => parse_flavor(&v).map(|f| dump = Some(f)),
            (f, _) => Err(format!("unknown flag or missing value: {f}")),
        };
        if let Err(e) = parsed {
            eprintln!("bench_mock: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    }
    let items: Vec<StreamItem> = (1..=deltas)
        .map(|i| StreamItem::Text {
            text: text.replace("{i}", &i.to_string()),
        })
        .collect();
    let end = StreamEnd::Complete { finish: None };
    if let Some(flavor) = dump {
        let facts = RequestFacts {
            seq: 1,
            model: "mock-model".into(),
            body_len: 200,
            include_usage: true,
            encrypted_reasoning: false,
        };
        let r = render_stream(flavor, &facts, &items, &end);
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let tail = match &r.tail {
            Tail::End(b) => text(b),
            Tail::Abort | Tail::Stall | Tail::Endless { .. } => String::new(),
        };
        let json = serde_json::json!({
            "prelude": text(&r.prelude),
            "steps": r.steps.iter().map(|s| text(s)).collect::<Vec<_>>(),
            "tail": tail,
        });
        println!("{json}");
        return ExitCode::SUCCESS;
    }
    let Some(addr) = addr else {
        eprintln!("bench_mock: --addr is required\n{USAGE}");
        return ExitCode::from(2);
    };
    let reply = Reply::Stream {
        items,
        end,
        delay_ms,
    };
    match serve_forever(addr, Vec::new(), reply) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench_mock: {e}");
            ExitCode::from(1)
        }
    }
}

fn parse_flavor(name: &str) -> Result<Flavor, String> {
    match name {
        "anthropic" => Ok(Flavor::Anthropic),
        "openai" => Ok(Flavor::Openai),
        "openai-chat" => Ok(Flavor::OpenaiChat),
        other => Err(format!("unknown flavor {other}")),
    }
}
