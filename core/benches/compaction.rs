//! In-process benchmarks of context budgeting: estimating and compacting a
//! 100,000-message transcript with `openmax_core::compaction` (`estimate_request`, `compact`),
//! time and memory.
//!
//! Memory is shown two ways: divan's allocation profiler (bytes and counts allocated per
//! iteration, in the tables), and, before the tables, the peak RSS (VmHWM of
//! /proc/self/status) of building the transcript and of one estimate + compaction over it.
//!
//! Run: `cargo bench -p openmax-core --bench compaction`

use divan::counter::ItemsCount;
use divan::{black_box, AllocProfiler, Bencher};

use openmax_core::compaction::{budget, compact, estimate_request, TARGET_PERCENT};
use openmax_core::conversation::{Block, Message, Role, ToolSchema};

#[global_allocator]
static ALLOC: AllocProfiler = AllocProfiler::system();

/// Messages in the benched transcript.
const MESSAGES: usize = 100_000;
/// The model's context window (200k, the default).
const CONTEXT_TOKENS: u64 = 200_000;

fn main() {
    peak_rss_report();
    divan::main();
}

/// A transcript of `n` messages in turns of four: a prompt, a tool call, its result (2,000
/// characters of output) and a reply.
fn transcript(n: usize) -> Vec<Message> {
    let mut out = Vec::with_capacity(n);
    let mut i = 0usize;
    while out.len() < n {
        let id = format!("call_{i}");
        let turn = [
            Message::user_text(format!("prompt {i}: please look at src/lib.rs and fix it")),
            Message {
                role: Role::Assistant,
                content: vec![Block::ToolUse {
                    id: id.clone(),
                    name: "read".into(),
                    input: serde_json::json!({ "path": "src/lib.rs", "offset": i }),
                }],
            },
            Message {
                role: Role::User,
                content: vec![Block::ToolResult {
                    id,
                    ok: true,
                    output: "fn main() { println!(\"hello\"); }\n".repeat(58),
                }],
            },
            Message::assistant_text(format!("Done with step {i}. ") + &"ok ".repeat(40)),
        ];
        for m in turn {
            if out.len() < n {
                out.push(m);
            }
        }
        i += 1;
    }
    out
}

fn tools() -> Vec<ToolSchema> {
    vec![ToolSchema {
        name: "read".into(),
        description: "Read a file".into(),
        parameters: serde_json::json!({
            "type": "object",
            "properties": { "path": { "type": "string" } },
            "required": ["path"]
        }),
    }]
}

const SYSTEM: &str = "You are a coding agent. Be terse.";

/// What the machine does before a request: the fixed part, then the compaction target.
fn fixed_and_target() -> (u64, u64) {
    let fixed = estimate_request(SYSTEM, &tools(), &[]);
    let room = budget(CONTEXT_TOKENS) - fixed;
    (fixed, fixed + room * TARGET_PERCENT / 100)
}

fn vm_hwm_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| {
                l["VmHWM:".len()..]
                    .trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse()
                    .ok()
            })
        })
        .unwrap_or(0)
}

/// Peak RSS before anything, after building the transcript, and after one estimate and one
/// compaction over it (the process's high-water mark: nothing else has run yet).
fn peak_rss_report() {
    let start = vm_hwm_kib();
    let mut messages = transcript(MESSAGES);
    let built = vm_hwm_kib();
    let t0 = std::time::Instant::now();
    let estimate = estimate_request(SYSTEM, &tools(), &messages);
    let est_time = t0.elapsed();
    let (fixed, target) = fixed_and_target();
    let current = messages.len() - 4;
    let t1 = std::time::Instant::now();
    let receipt = compact(&mut messages, current, fixed, None, target);
    let compact_time = t1.elapsed();
    let after = vm_hwm_kib();
    println!(
        "compaction of {MESSAGES} messages: estimate {estimate} tokens in {:.1} ms; compact to \
         {} tokens ({} messages changed or removed, {} kept) in {:.1} ms",
        est_time.as_secs_f64() * 1e3,
        receipt.tokens_after,
        receipt.compacted_messages,
        messages.len(),
        compact_time.as_secs_f64() * 1e3,
    );
    println!(
        "peak RSS (VmHWM): {start} KiB at start, {built} KiB with the transcript built \
         (+{} KiB), {after} KiB after estimate + compact (+{} KiB over the transcript)",
        built - start,
        after - built
    );
    assert!(receipt.tokens_after <= target, "compaction met its target");
}

/// `estimate_request` over the whole transcript (the estimate made before every request).
#[divan::bench]
fn request_tokens_100k(bencher: Bencher) {
    let messages = transcript(MESSAGES);
    let tools = tools();
    bencher
        .counter(ItemsCount::new(MESSAGES))
        .bench_local(|| black_box(estimate_request(SYSTEM, &tools, black_box(&messages))));
}

/// `compact` of the 100,000-message transcript down to the target (a fresh copy per
/// iteration, made outside the timing; its drop is timed with the run).
#[divan::bench(sample_count = 20, sample_size = 1)]
fn compact_100k(bencher: Bencher) {
    let messages = transcript(MESSAGES);
    let (fixed, target) = fixed_and_target();
    bencher
        .counter(ItemsCount::new(MESSAGES))
        .with_inputs(|| messages.clone())
        .bench_local_refs(|m| {
            let current = m.len() - 4;
            black_box(compact(m, current, fixed, None, target))
        });
}
