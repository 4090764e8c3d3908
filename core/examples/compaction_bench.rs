//! Benchmark: estimate and compact a 100,000-message transcript.
//!
//! Builds 25,000 turns (prompt, tool call, a 2,000-character tool output, answer), estimates
//! the whole request, then runs the forced compaction a 200,000-token window would do before
//! the next request. Prints the time of each step and the peak resident memory (VmHWM from
//! /proc/self/status; reading /proc is fine in an example, never in the core library).
//!
//! Run: `cargo run --release -p openmax-core --example compaction_bench`

use std::time::Instant;

use openmax_core::compaction::{self, Scale, Verdict};
use openmax_core::conversation::{Block, Message, Role, ToolSchema};

const MESSAGES: usize = 100_000;
const CONTEXT_TOKENS: u64 = 200_000;

fn transcript() -> Vec<Message> {
    let mut out = Vec::with_capacity(MESSAGES + 1);
    for i in 0..MESSAGES / 4 {
        out.push(Message::user_text(format!(
            "step {i}: read the next file and fix it"
        )));
        out.push(Message {
            role: Role::Assistant,
            content: vec![
                Block::text(format!("Reading src/file{i}.rs.")),
                Block::ToolUse {
                    id: format!("call_{i}"),
                    name: "read_file".into(),
                    input: serde_json::json!({"path": format!("src/file{i}.rs")}),
                },
            ],
        });
        out.push(Message {
            role: Role::User,
            content: vec![Block::ToolResult {
                id: format!("call_{i}"),
                ok: true,
                output: format!("fn f{i}() {{}}\n").repeat(2000 / 12),
            }],
        });
        out.push(Message::assistant_text(format!("Fixed file {i}.")));
    }
    out
}

fn vm_hwm_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn main() {
    let system = "You are a careful coding agent.".repeat(20);
    let tools: Vec<ToolSchema> = (0..12)
        .map(|i| ToolSchema {
            name: format!("tool_{i}"),
            description: "A tool that does something useful with files.".into(),
            parameters: serde_json::json!({"type":"object","properties":{"path":{"type":"string"}}}),
        })
        .collect();

    let t = Instant::now();
    let mut messages = transcript();
    messages.push(Message::user_text("the current prompt"));
    let build = t.elapsed();
    println!("built {} messages in {:?}", messages.len(), build);
    if let Some(k) = vm_hwm_kib() {
        println!("peak RSS after building: {:.1} MiB", k as f64 / 1024.0);
    }

    let t = Instant::now();
    let estimate = compaction::estimate_request(&system, &tools, &messages);
    let est_time = t.elapsed();
    println!("estimated {estimate} tokens in {est_time:?}");

    let scale = Scale::learn(estimate + estimate / 10, estimate);
    let fixed = compaction::estimate_fixed(&system, &tools);
    let fixed_scaled = Scale::apply(scale, fixed);
    let Verdict::Compact { target } =
        compaction::verdict(CONTEXT_TOKENS, Scale::apply(scale, estimate), fixed_scaled)
    else {
        panic!("a transcript this long must be over the trigger")
    };
    let current = messages.len() - 1;
    let t = Instant::now();
    let receipt = compaction::compact(&mut messages, current, fixed, scale, target);
    let compact_time = t.elapsed();
    println!(
        "compacted to target {target} in {compact_time:?}: tokens_before {} tokens_after {} \
         compacted_messages {} ({} messages left)",
        receipt.tokens_before,
        receipt.tokens_after,
        receipt.compacted_messages,
        messages.len()
    );
    assert_eq!(
        receipt.tokens_after,
        Scale::apply(
            scale,
            compaction::estimate_request(&system, &tools, &messages)
        )
    );
    if let Some(k) = vm_hwm_kib() {
        println!("peak RSS: {:.1} MiB", k as f64 / 1024.0);
    }
}
