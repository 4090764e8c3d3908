//! Context budgeting: the token estimator and forced compaction.
//!
//! # Estimator
//! Tokens are estimated from characters, per content kind, because a harness must see an
//! overflow coming before the provider refuses the request:
//! - text, thinking and tool output: `ceil(chars / 4)`;
//! - tool-call inputs and tool schemas (JSON): `ceil(json_bytes / 3)` (JSON tokenizes denser);
//! - every message costs 4 tokens of framing, every block 2.
//!
//! The machine scales estimates up by the ratio reported/estimated when the provider reported
//! more prompt tokens than estimated for the last request (the contract's `budget` rule).
//!
//! # Compaction
//! The usable budget is `context_tokens - reply_reserve` (the reserve keeps room for the reply:
//! `min(8192, context_tokens / 4)`). Compaction is forced when the estimate of the next request
//! (system + schemas + messages, scaled) is over [`TRIGGER_PERCENT`]% of the budget, and prunes to
//! [`TARGET_PERCENT`]%:
//! 1. oldest tool outputs first, each replaced by a stub saying how much was cut;
//! 2. then oldest whole turns (a user prompt and everything up to the next prompt).
//!
//! Never the system prompt, the frozen schemas, or the current turn. It stops as soon as the
//! target is met. `compacted_messages` counts the messages changed or removed (0 when the
//! transcript was already at or under the target).
//!
//! When the schemas alone take over [`SCHEMAS_OVER_PERCENT`]% of the budget, `schemas_over_budget`
//! is advised once: compaction then aims at what little is left, and once the schema tokens
//! reach the budget it stops entirely (pruning cannot pay a fixed per-request cost).

use crate::conversation::{Block, Message, Role, ToolSchema};

/// Compaction starts when the estimate is over this share of the budget.
pub const TRIGGER_PERCENT: u64 = 90;
/// Compaction prunes down to this share of the budget.
pub const TARGET_PERCENT: u64 = 60;
/// `schemas_over_budget` is advised when schemas take more than this share of the budget.
pub const SCHEMAS_OVER_PERCENT: u64 = 50;

/// Tokens kept free for the reply.
pub fn reply_reserve(context_tokens: u64) -> u64 {
    (context_tokens / 4).min(8192)
}

/// The budget a request may use: the window less the reply reserve.
pub fn budget(context_tokens: u64) -> u64 {
    context_tokens.saturating_sub(reply_reserve(context_tokens))
}

fn text_tokens(s: &str) -> u64 {
    (s.chars().count() as u64).div_ceil(4)
}

fn json_tokens(v: &serde_json::Value) -> u64 {
    (v.to_string().len() as u64).div_ceil(3)
}

/// Estimated tokens of one message.
pub fn message_tokens(m: &Message) -> u64 {
    let mut t = 4;
    for b in &m.content {
        t += 2 + match b {
            Block::Text { text } => text_tokens(text),
            Block::Thinking { text, signature } => {
                text_tokens(text)
                    + signature
                        .as_deref()
                        .map_or(0, |s| (s.len() as u64).div_ceil(4))
            }
            Block::ToolUse { id, name, input } => {
                text_tokens(id) + text_tokens(name) + json_tokens(input)
            }
            Block::ToolResult { id, output, .. } => text_tokens(id) + text_tokens(output),
        };
    }
    t
}

/// Estimated tokens of the frozen schemas (re-sent with every request).
pub fn schema_tokens(tools: &[ToolSchema]) -> u64 {
    tools
        .iter()
        .map(|t| {
            8 + text_tokens(&t.name) + text_tokens(&t.description) + json_tokens(&t.parameters)
        })
        .sum()
}

/// Estimated tokens of a system prompt.
pub fn system_tokens(system: &str) -> u64 {
    text_tokens(system)
}

/// Estimated tokens of a whole request, unscaled.
pub fn request_tokens(system: &str, tools: &[ToolSchema], messages: &[Message]) -> u64 {
    system_tokens(system) + schema_tokens(tools) + messages.iter().map(message_tokens).sum::<u64>()
}

/// Apply the scale-up ratio (reported/estimated, in per-mille, ≥ 1000).
pub fn scaled(tokens: u64, scale_permille: u64) -> u64 {
    tokens
        .saturating_mul(scale_permille.max(1000))
        .div_ceil(1000)
}

/// The receipt of one compaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Receipt {
    pub tokens_before: u64,
    pub tokens_after: u64,
    pub compacted_messages: u64,
}

/// What the machine should do about the budget before sending a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Under the trigger: send as is.
    Fits,
    /// Over the trigger: compact down to `target` tokens (scaled units).
    Compact { target: u64 },
    /// The schemas alone reach the budget: compaction is pointless; send as is.
    SchemasFill,
}

/// Decide, from the scaled estimate of the whole request and of the fixed part
/// (system + schemas), whether to compact.
pub fn verdict(context_tokens: u64, estimate: u64, fixed: u64) -> Verdict {
    let budget = budget(context_tokens);
    if fixed >= budget {
        return Verdict::SchemasFill;
    }
    if estimate * 100 <= budget * TRIGGER_PERCENT {
        return Verdict::Fits;
    }
    // Aim at the target share of what the conversation may use beside the fixed part; when the
    // fixed part is large this is "what little is left".
    let room = budget - fixed;
    Verdict::Compact {
        target: fixed + room * TARGET_PERCENT / 100,
    }
}

/// Whether the schemas take most of the budget (the advisory's condition).
pub fn schemas_over_budget(context_tokens: u64, schema_tokens: u64) -> bool {
    schema_tokens * 100 > budget(context_tokens) * SCHEMAS_OVER_PERCENT
}

/// Prune `messages` in place until `fixed + scaled(messages) <= target`. `current_turn_start`
/// is the index of the current turn's user prompt: nothing from there on is touched. Returns
/// the receipt (tokens in scaled units).
pub fn compact(
    messages: &mut Vec<Message>,
    current_turn_start: usize,
    fixed: u64,
    scale_permille: u64,
    target: u64,
) -> Receipt {
    let mut sizes: Vec<u64> = messages.iter().map(message_tokens).collect();
    let mut total: u64 = sizes.iter().sum();
    let before = fixed + scaled(total, scale_permille);
    let protected = current_turn_start.min(messages.len());
    let mut changed = vec![false; messages.len()];
    let over = |total: u64| fixed + scaled(total, scale_permille) > target;

    // 1. Oldest tool outputs first.
    'outer: for i in 0..protected {
        if !over(total) {
            break 'outer;
        }
        let m = &mut messages[i];
        let mut touched = false;
        for b in &mut m.content {
            if let Block::ToolResult { output, .. } = b {
                if output.starts_with(STUB_PREFIX) {
                    continue;
                }
                let chars = output.chars().count();
                *output = format!("{STUB_PREFIX} {chars} characters of tool output were cut to fit the context window]");
                touched = true;
            }
        }
        if touched {
            let new = message_tokens(m);
            total = total - sizes[i] + new;
            sizes[i] = new;
            changed[i] = true;
        }
    }

    // 2. Then oldest whole turns: drop from the front up to the next user prompt.
    let mut drop_to = 0usize;
    while over(total) && drop_to < protected {
        let mut end = drop_to + 1;
        while end < protected && !is_prompt(&messages[end]) {
            end += 1;
        }
        for s in &sizes[drop_to..end] {
            total -= s;
        }
        drop_to = end;
    }
    let removed = drop_to as u64;
    let rewritten = changed[drop_to..].iter().filter(|c| **c).count() as u64;
    messages.drain(..drop_to);
    Receipt {
        tokens_before: before,
        tokens_after: fixed + scaled(total, scale_permille),
        compacted_messages: removed + rewritten,
    }
}

/// The text every pruned tool output starts with.
pub const STUB_PREFIX: &str = "[compacted:";

/// A user message that starts a turn (has text and no tool results).
pub fn is_prompt(m: &Message) -> bool {
    m.role == Role::User
        && m.content.iter().any(|b| matches!(b, Block::Text { .. }))
        && !m
            .content
            .iter()
            .any(|b| matches!(b, Block::ToolResult { .. }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(i: usize, out_len: usize) -> Vec<Message> {
        vec![
            Message::user_text(format!("prompt {i}")),
            Message {
                role: Role::Assistant,
                content: vec![Block::ToolUse {
                    id: format!("c{i}"),
                    name: "read_file".into(),
                    input: serde_json::json!({"path":"a"}),
                }],
            },
            Message {
                role: Role::User,
                content: vec![Block::ToolResult {
                    id: format!("c{i}"),
                    ok: true,
                    output: "x".repeat(out_len),
                }],
            },
            Message::assistant_text(format!("answer {i}")),
        ]
    }

    #[test]
    fn prunes_tool_outputs_before_turns_and_spares_current_turn() {
        let mut msgs: Vec<Message> = (0..10).flat_map(|i| turn(i, 4000)).collect();
        let current = msgs.len() - 4;
        let total = msgs.iter().map(message_tokens).sum::<u64>();
        let r = compact(&mut msgs, current, 100, 1000, total / 2);
        assert_eq!(r.tokens_before, 100 + total);
        assert!(r.tokens_after <= total / 2);
        assert_eq!(msgs.len(), 40, "only outputs pruned, no turn dropped");
        assert!(r.compacted_messages >= 1);
        // The current turn's output is intact.
        assert!(
            matches!(&msgs[38].content[0], Block::ToolResult { output, .. } if output.len() == 4000)
        );
        // Pruned ones carry the stub.
        assert!(
            matches!(&msgs[2].content[0], Block::ToolResult { output, .. } if output.starts_with(STUB_PREFIX))
        );
    }

    #[test]
    fn drops_whole_turns_when_outputs_are_not_enough() {
        let mut msgs: Vec<Message> = (0..10).flat_map(|i| turn(i, 10)).collect();
        let current = msgs.len() - 4;
        let r = compact(&mut msgs, current, 0, 1000, 30);
        assert!(is_prompt(&msgs[0]), "starts at a turn boundary");
        assert!(msgs.len() >= 4, "the current turn survives");
        assert_eq!(msgs[msgs.len() - 4], Message::user_text("prompt 9"));
        assert!(r.compacted_messages > 0);
    }

    #[test]
    fn nothing_to_do_under_target() {
        let mut msgs: Vec<Message> = turn(0, 10);
        let r = compact(&mut msgs, 0, 0, 1000, 1_000_000);
        assert_eq!(r.compacted_messages, 0);
        assert_eq!(r.tokens_before, r.tokens_after);
    }

    #[test]
    fn verdicts() {
        assert_eq!(verdict(10_000, 100, 10), Verdict::Fits);
        assert!(matches!(
            verdict(10_000, 7_400, 10),
            Verdict::Compact { .. }
        ));
        assert_eq!(verdict(10_000, 9_000, 7_500), Verdict::SchemasFill);
        assert!(schemas_over_budget(10_000, 4_000));
        assert!(!schemas_over_budget(10_000, 1_000));
        assert_eq!(scaled(1000, 1500), 1500);
        assert_eq!(scaled(1000, 900), 1000);
    }
}
