//! Context budgeting: the one token estimator, the scale-up, the compaction thresholds and the
//! prune algorithm. Pure functions; the turn machine (`machine::stream`) decides when to call
//! them and what to emit. `docs/context.md` explains the whole mechanism for users.
//!
//! # Estimator
//! Tokens are estimated from characters, per content kind, so that a harness sees an overflow
//! coming before the provider refuses the request. It is deliberately simple so that clients
//! and tests can reproduce it:
//! - text (system prompt, text and thinking blocks, thinking signatures, tool-call ids and
//!   names, tool output): `ceil(chars / 4)` ([`estimate_text`]);
//! - JSON (tool-call inputs, and each frozen tool schema serialized whole as
//!   `{"name","description","parameters"}`): `ceil(compact_json_bytes / 3)`, since JSON
//!   tokenizes denser ([`estimate_json`]);
//! - images: `ceil(width × height / 750)`, at most [`MAX_IMAGE_TOKENS`] (the most also when
//!   the size is unknown) ([`estimate_image`]);
//! - framing: every block costs [`BLOCK_OVERHEAD`] more, every message [`MESSAGE_OVERHEAD`].
//!   Messages are counted as the request carries them: consecutive messages of one role form
//!   one request message, and empty messages are dropped (the machine's body normalization),
//!   so [`estimate_request`] over a conversation equals [`estimate_body`] of the request built
//!   from it, exactly.
//! - the schemas are counted in every request, since every request re-sends them.
//!
//! # Scale-up
//! When the provider reported more prompt tokens for the last request than the estimate of
//! that request's body, every later estimate is multiplied by `reported / estimated` (an exact
//! ratio, rounded up: [`Scale`]). When it reported no more, no scaling applies. Every figure on
//! the wire (`budget.used_tokens`, the `compacted` receipt, `schemas_over_budget`) and every
//! threshold comparison is in scaled units.
//!
//! # Thresholds
//! The usable budget is `context_tokens - reply_reserve` ([`budget`]), the reserve keeping
//! room for the reply: `min(8192, context_tokens / 4)` ([`reply_reserve`]). The fixed part of
//! every request is the system prompt plus the frozen schemas; pruning cannot make it smaller.
//! - [`verdict`]: compaction is forced before a request is sent when the scaled estimate of
//!   the request is over [`TRIGGER_PERCENT`]% of the budget; it prunes to the fixed part plus
//!   [`TARGET_PERCENT`]% of what the budget leaves beside it.
//! - `schema_tokens` (the scaled schemas) and `budget_tokens` (the budget less the scaled
//!   system prompt, [`budget_tokens`]): when `schema_tokens` is over
//!   [`SCHEMAS_OVER_PERCENT`]% of `budget_tokens`, `schemas_over_budget` is advised (once per
//!   session); compaction then aims at what little is left; once `schema_tokens >=
//!   budget_tokens` (equivalently the fixed part fills the budget) compaction stops entirely
//!   ([`Verdict::SchemasFill`]) and the request goes out as is.
//!
//! # Pruning ([`compact`])
//! 1. Oldest tool outputs first: each tool result before the current turn is replaced by a
//!    stub starting with [`STUB_PREFIX`] that says how many characters were cut (only where
//!    the stub is shorter than the output; a stub is never stubbed again).
//! 2. Then oldest whole turns: from the front, up to the next user prompt ([`is_prompt`]: a
//!    user message with text and no tool results), so a `tool_use` is never separated from
//!    its result and the transcript still starts with a user message.
//!
//! Never the system prompt, the frozen schemas, or the current turn (everything from its
//! prompt on). It stops as soon as the target is met. The receipt's `compacted_messages`
//! counts the messages removed plus the surviving ones rewritten; 0 means nothing changed.
//!
//! Invariants: pure and deterministic; [`compact`] only removes a prefix and rewrites tool
//! outputs, so the messages from `current_turn_start` on are untouched and keep their order;
//! the receipt's `tokens_after` is exactly `Scale::apply(scale, fixed + estimate_messages(..))`
//! of the messages it leaves, and is at most `target` unless nothing outside the current turn
//! is left to cut.

use serde::Serialize;

use crate::conversation::{Block, Message, ModelRequest, Role, ToolSchema};

/// Compaction is forced when the request's estimate is over this share of the budget.
pub const TRIGGER_PERCENT: u64 = 90;
/// Compaction prunes to the fixed part plus this share of what the budget leaves beside it.
pub const TARGET_PERCENT: u64 = 60;
/// `schemas_over_budget` is advised when the schemas take more than this share of
/// `budget_tokens`.
pub const SCHEMAS_OVER_PERCENT: u64 = 50;
/// The largest reply reserve, in tokens.
pub const MAX_REPLY_RESERVE: u64 = 8192;
/// Framing tokens counted per (request) message.
pub const MESSAGE_OVERHEAD: u64 = 4;
/// Framing tokens counted per block.
pub const BLOCK_OVERHEAD: u64 = 2;
/// The text every pruned tool output starts with.
pub const STUB_PREFIX: &str = "[compacted:";

// ----- the estimator ----------------------------------------------------------------------------

/// Tokens an image is counted as at most: what Anthropic charges for the largest image it
/// keeps (about 1.15 megapixels after its own resize); OpenAI's high-detail count is lower.
pub const MAX_IMAGE_TOKENS: u64 = 1600;

/// Estimated tokens of an image: `ceil(width × height / 750)` (Anthropic's rule), at most
/// [`MAX_IMAGE_TOKENS`]; an image whose size is unknown counts as the most.
pub fn estimate_image(img: &crate::conversation::Image) -> u64 {
    match (img.width, img.height) {
        (Some(w), Some(h)) => (u64::from(w) * u64::from(h))
            .div_ceil(750)
            .clamp(1, MAX_IMAGE_TOKENS),
        _ => MAX_IMAGE_TOKENS,
    }
}

/// Estimated tokens of a text: characters / 4, rounded up.
pub fn estimate_text(s: &str) -> u64 {
    (s.chars().count() as u64).div_ceil(4)
}

/// Estimated tokens of a JSON value: compact serialization length in bytes / 3, rounded up.
pub fn estimate_json(v: &serde_json::Value) -> u64 {
    (json_len(v) as u64).div_ceil(3)
}

/// Estimated tokens of one block's content (without its framing).
pub fn estimate_block(b: &Block) -> u64 {
    match b {
        Block::Text { text } => estimate_text(text),
        Block::Thinking { text, signature } => {
            estimate_text(text) + signature.as_deref().map_or(0, estimate_text)
        }
        Block::ToolUse { id, name, input } => {
            estimate_text(id) + estimate_text(name) + estimate_json(input)
        }
        Block::ToolResult { id, output, .. } => estimate_text(id) + estimate_text(output),
        Block::Image(img) => estimate_image(img),
    }
}

/// Estimated tokens of one message on its own: its blocks with their framing, plus the
/// message framing (0 for an empty message, which no request carries).
pub fn estimate_message(m: &Message) -> u64 {
    if m.content.is_empty() {
        0
    } else {
        MESSAGE_OVERHEAD + blocks_cost(m)
    }
}

/// Estimated tokens of a message list as a request carries it: consecutive messages of one
/// role count one message framing, empty messages count nothing.
pub fn estimate_messages(messages: &[Message]) -> u64 {
    let starts = run_starts(messages);
    messages
        .iter()
        .zip(&starts)
        .map(|(m, s)| blocks_cost(m) + if *s { MESSAGE_OVERHEAD } else { 0 })
        .sum()
}

/// Estimated tokens of the frozen tool schemas (re-sent with every request): each schema's
/// compact JSON `{"name","description","parameters"}` / 3.
pub fn estimate_schemas(tools: &[ToolSchema]) -> u64 {
    tools.iter().map(estimate_schema).sum()
}

/// Estimated tokens of one tool schema.
pub fn estimate_schema(t: &ToolSchema) -> u64 {
    let len = serde_json::to_string(&SchemaJson {
        name: &t.name,
        description: &t.description,
        parameters: &t.parameters,
    })
    // Serializing strings and a `Value` cannot fail.
    .map_or(0, |s| s.len());
    (len as u64).div_ceil(3)
}

/// Estimated tokens of the fixed part of every request: the system prompt and the schemas.
pub fn estimate_fixed(system: &str, tools: &[ToolSchema]) -> u64 {
    estimate_text(system) + estimate_schemas(tools)
}

/// Estimated tokens of a whole request, unscaled: system prompt, schemas and messages.
pub fn estimate_request(system: &str, tools: &[ToolSchema], messages: &[Message]) -> u64 {
    estimate_fixed(system, tools) + estimate_messages(messages)
}

/// Estimated tokens of a [`ModelRequest`] (equal to [`estimate_request`] over the
/// conversation it was built from).
pub fn estimate_body(req: &ModelRequest) -> u64 {
    estimate_request(&req.system, &req.tools, &req.messages)
}

/// The scale-up learned from the last request: the server reported `reported` prompt tokens
/// for a body estimated at `estimated` (only kept when `reported > estimated`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scale {
    /// Prompt tokens the provider reported.
    pub reported: u64,
    /// The estimate of the body it reported them for.
    pub estimated: u64,
}

impl Scale {
    /// The scale learned from one request, or `None` when the server reported no more than
    /// the estimate (or reported nothing useful).
    pub fn learn(reported: u64, estimated: u64) -> Option<Scale> {
        if estimated > 0 && reported > estimated {
            Some(Scale {
                reported,
                estimated,
            })
        } else {
            None
        }
    }

    /// `estimate * reported / estimated`, rounded up, saturating; `estimate` when `None`.
    pub fn apply(scale: Option<Scale>, estimate: u64) -> u64 {
        match scale {
            None => estimate,
            Some(s) => {
                let v = (estimate as u128 * s.reported as u128).div_ceil(s.estimated as u128);
                u64::try_from(v).unwrap_or(u64::MAX)
            }
        }
    }
}

// ----- thresholds -------------------------------------------------------------------------------

/// Tokens kept free for the reply: `min(8192, context_tokens / 4)`.
pub fn reply_reserve(context_tokens: u64) -> u64 {
    (context_tokens / 4).min(MAX_REPLY_RESERVE)
}

/// The budget a request may use: the window less the reply reserve.
pub fn budget(context_tokens: u64) -> u64 {
    context_tokens.saturating_sub(reply_reserve(context_tokens))
}

/// `schemas_over_budget.budget_tokens`: the budget less the (scaled) system prompt, i.e. what
/// the schemas and the conversation share.
pub fn budget_tokens(context_tokens: u64, system_tokens: u64) -> u64 {
    budget(context_tokens).saturating_sub(system_tokens)
}

/// Whether the (scaled) schemas take more than [`SCHEMAS_OVER_PERCENT`]% of `budget_tokens`:
/// the advisory's condition.
pub fn schemas_over_budget(schema_tokens: u64, budget_tokens: u64) -> bool {
    schema_tokens.saturating_mul(100) > budget_tokens.saturating_mul(SCHEMAS_OVER_PERCENT)
}

/// What the machine should do about the budget before sending a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// At or under the trigger: send as is.
    Fits,
    /// Over the trigger: compact down to `target` tokens (scaled units).
    Compact {
        /// The token count to compact down to.
        target: u64,
    },
    /// The fixed part (system prompt and schemas) fills the budget, i.e. `schema_tokens >=
    /// budget_tokens`: compaction cannot pay a fixed per-request cost; send as is.
    SchemasFill,
}

/// Decide, from the scaled estimate of the whole request and of its fixed part (system prompt
/// and schemas), whether to compact.
pub fn verdict(context_tokens: u64, estimate: u64, fixed: u64) -> Verdict {
    let budget = budget(context_tokens);
    if fixed >= budget {
        return Verdict::SchemasFill;
    }
    if estimate.saturating_mul(100) <= budget.saturating_mul(TRIGGER_PERCENT) {
        return Verdict::Fits;
    }
    Verdict::Compact {
        target: prune_target(context_tokens, fixed),
    }
}

/// The prune target (scaled): the fixed part plus [`TARGET_PERCENT`]% of what the budget
/// leaves beside it ("what little is left" when the schemas are large).
pub fn prune_target(context_tokens: u64, fixed: u64) -> u64 {
    let room = budget(context_tokens).saturating_sub(fixed);
    fixed + room * TARGET_PERCENT / 100
}

// ----- pruning ----------------------------------------------------------------------------------

/// The receipt of one compaction (scaled units), as the `compacted` event carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Receipt {
    /// The scaled estimate before compaction.
    pub tokens_before: u64,
    /// The scaled estimate of the request now sent.
    pub tokens_after: u64,
    /// How many messages were cut or stubbed.
    pub compacted_messages: u64,
}

/// Prune `messages` in place until `Scale::apply(scale, fixed + estimate_messages(messages))
/// <= target`, or nothing outside the current turn is left to cut. `fixed` is the unscaled
/// estimate of the system prompt and schemas; `current_turn_start` is the index of the current
/// turn's prompt: nothing from there on is touched (the caller shifts its index down by the
/// number of messages removed, `len_before - len_after`). Returns the receipt (scaled units).
pub fn compact(
    messages: &mut Vec<Message>,
    current_turn_start: usize,
    fixed: u64,
    scale: Option<Scale>,
    target: u64,
) -> Receipt {
    let protected = current_turn_start.min(messages.len());
    let starts = run_starts(messages);
    let nonempty: Vec<bool> = messages.iter().map(|m| !m.content.is_empty()).collect();
    let mut blocks: Vec<u64> = messages.iter().map(blocks_cost).collect();
    let mut total_blocks: u64 = blocks.iter().sum();
    let runs = starts.iter().filter(|s| **s).count() as u64;
    // Framing of the messages from `from` on, once everything before `from` is dropped: the
    // runs that start there, plus one when the first non-empty message left continued a run.
    let framing = |from: usize, runs_before: u64| -> u64 {
        let first = (from..nonempty.len()).find(|i| nonempty[*i]);
        let extra = u64::from(first.is_some_and(|i| !starts[i]));
        (runs - runs_before + extra) * MESSAGE_OVERHEAD
    };
    let scaled = |blocks: u64, framing: u64| Scale::apply(scale, fixed + blocks + framing);
    let before = scaled(total_blocks, framing(0, 0));
    let mut changed = vec![false; messages.len()];

    // 1. Oldest tool outputs first.
    for i in 0..protected {
        if scaled(total_blocks, framing(0, 0)) <= target {
            break;
        }
        let mut touched = false;
        for b in &mut messages[i].content {
            if let Block::Image(img) = b {
                *b = Block::text(format!(
                    "{STUB_PREFIX} an {} was cut to fit the context window]",
                    img.describe()
                ));
                touched = true;
                continue;
            }
            if let Block::ToolResult { output, .. } = b {
                if output.starts_with(STUB_PREFIX) {
                    continue;
                }
                let chars = output.chars().count();
                let stub = stub_text(chars);
                if stub.chars().count() < chars {
                    *output = stub;
                    touched = true;
                }
            }
        }
        if touched {
            let new = blocks_cost(&messages[i]);
            total_blocks = total_blocks - blocks[i] + new;
            blocks[i] = new;
            changed[i] = true;
        }
    }

    // 2. Then oldest whole turns: drop from the front up to the next prompt.
    let mut drop_to = 0usize;
    let mut runs_before = 0u64;
    while drop_to < protected && scaled(total_blocks, framing(drop_to, runs_before)) > target {
        let mut end = drop_to + 1;
        while end < protected && !is_prompt(&messages[end]) {
            end += 1;
        }
        for i in drop_to..end {
            total_blocks -= blocks[i];
            runs_before += u64::from(starts[i]);
        }
        drop_to = end;
    }
    let after = scaled(total_blocks, framing(drop_to, runs_before));
    let rewritten = changed[drop_to..].iter().filter(|c| **c).count() as u64;
    messages.drain(..drop_to);
    Receipt {
        tokens_before: before,
        tokens_after: after,
        compacted_messages: drop_to as u64 + rewritten,
    }
}

/// A user message that starts a turn: it has text and no tool results.
pub fn is_prompt(m: &Message) -> bool {
    m.role == Role::User
        && m.content.iter().any(|b| matches!(b, Block::Text { .. }))
        && !m
            .content
            .iter()
            .any(|b| matches!(b, Block::ToolResult { .. }))
}

/// The stub a pruned tool output is replaced by.
pub fn stub_text(chars: usize) -> String {
    format!("{STUB_PREFIX} {chars} characters of tool output were cut to fit the context window]")
}

// ----- private helpers --------------------------------------------------------------------------

#[derive(Serialize)]
struct SchemaJson<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a serde_json::Value,
}

/// The blocks of a message with their framing.
fn blocks_cost(m: &Message) -> u64 {
    m.content
        .iter()
        .map(|b| BLOCK_OVERHEAD + estimate_block(b))
        .sum()
}

/// For each message: whether it starts a request message (it is non-empty and the previous
/// non-empty message has another role, or there is none).
fn run_starts(messages: &[Message]) -> Vec<bool> {
    let mut prev: Option<Role> = None;
    messages
        .iter()
        .map(|m| {
            if m.content.is_empty() {
                return false;
            }
            let start = prev != Some(m.role);
            prev = Some(m.role);
            start
        })
        .collect()
}

/// The compact serialization length of a JSON value, without building the string.
fn json_len(v: &serde_json::Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    // Writing a `Value` to an in-memory counter cannot fail.
    let _ = serde_json::to_writer(&mut c, v);
    c.0
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
    fn estimator_figures() {
        assert_eq!(estimate_text(""), 0);
        assert_eq!(estimate_text("abcd"), 1);
        assert_eq!(estimate_text("abcde"), 2);
        assert_eq!(estimate_text("éééé"), 1, "characters, not bytes");
        assert_eq!(estimate_json(&serde_json::json!({"a":1})), 3, "7 bytes / 3");
        assert_eq!(estimate_message(&Message::user_text("abcd")), 4 + 2 + 1);
        assert_eq!(estimate_message(&Message::user_text("")), 4 + 2);
        assert_eq!(
            estimate_message(&Message {
                role: Role::User,
                content: vec![]
            }),
            0
        );
        let t = ToolSchema {
            name: "ab".into(),
            description: "cd".into(),
            parameters: serde_json::json!({}),
        };
        // {"name":"ab","description":"cd","parameters":{}} is 48 bytes.
        assert_eq!(estimate_schemas(&[t.clone(), t.clone()]), 32);
        assert_eq!(
            estimate_fixed("abcdefgh", &[t]),
            2 + 16,
            "system prompt plus schemas"
        );
    }

    /// Every part of a block counts, each by its own rule, and the parts add up.
    #[test]
    fn each_block_kind_counts_all_its_parts() {
        let thinking = |text: &str, signature: Option<&str>| Block::Thinking {
            text: text.into(),
            signature: signature.map(Into::into),
        };
        assert_eq!(estimate_block(&thinking("abcdefgh", None)), 2);
        // The signature (12 chars, 3) is longer than the text (4 chars, 1): a difference or
        // a product of the two would not give 4.
        assert_eq!(
            estimate_block(&thinking("abcd", Some("abcdefghijkl"))),
            1 + 3
        );
        assert_eq!(estimate_block(&thinking("abcdefgh", Some("abcd"))), 2 + 1);
        let call = Block::ToolUse {
            id: "abcdefgh".into(),
            name: "abcdefghijkl".into(),
            input: serde_json::json!({"a":1}),
        };
        assert_eq!(
            estimate_block(&call),
            2 + 3 + 3,
            "id, name and the input's JSON"
        );
        let result = Block::ToolResult {
            id: "abcdefgh".into(),
            ok: true,
            output: "abcdefghijkl".into(),
        };
        assert_eq!(estimate_block(&result), 2 + 3, "id and output");
    }

    #[test]
    fn consecutive_messages_of_one_role_share_one_framing() {
        let msgs = vec![
            Message::user_text("abcd"),
            Message::user_text("abcd"),
            Message {
                role: Role::Assistant,
                content: vec![],
            },
            Message::user_text("abcd"),
            Message::assistant_text("abcd"),
        ];
        // Three user blocks in one run (the empty message does not split it), then one
        // assistant run.
        assert_eq!(estimate_messages(&msgs), (3 * 3 + 4) + (4 + 3));
    }

    #[test]
    fn scale() {
        assert_eq!(Scale::learn(10, 20), None);
        assert_eq!(Scale::learn(20, 20), None);
        assert_eq!(Scale::learn(5, 0), None);
        let s = Scale::learn(30, 20);
        assert_eq!(Scale::apply(s, 10), 15);
        assert_eq!(Scale::apply(s, 11), 17, "rounded up");
        assert_eq!(Scale::apply(None, 10), 10);
        assert_eq!(Scale::apply(Scale::learn(u64::MAX, 1), 3), u64::MAX);
    }

    #[test]
    fn prunes_tool_outputs_before_turns_and_spares_current_turn() {
        let mut msgs: Vec<Message> = (0..10).flat_map(|i| turn(i, 4000)).collect();
        let current = msgs.len() - 4;
        let total = estimate_messages(&msgs);
        let r = compact(&mut msgs, current, 100, None, total / 2);
        assert_eq!(r.tokens_before, 100 + total);
        assert!(r.tokens_after <= total / 2);
        assert_eq!(r.tokens_after, 100 + estimate_messages(&msgs));
        assert_eq!(msgs.len(), 40, "only outputs pruned, no turn dropped");
        assert!(r.compacted_messages >= 1);
        // The current turn's output is intact.
        assert!(
            matches!(&msgs[38].content[0], Block::ToolResult { output, .. } if output.len() == 4000)
        );
        // The oldest are pruned first and carry the stub; the last old ones are intact.
        assert!(
            matches!(&msgs[2].content[0], Block::ToolResult { output, .. } if output == &stub_text(4000))
        );
        assert!(
            matches!(&msgs[34].content[0], Block::ToolResult { output, .. } if output.len() == 4000)
        );
    }

    #[test]
    fn drops_whole_turns_when_outputs_are_not_enough() {
        let mut msgs: Vec<Message> = (0..10).flat_map(|i| turn(i, 10)).collect();
        let current = msgs.len() - 4;
        let r = compact(&mut msgs, current, 0, None, 30);
        assert!(is_prompt(&msgs[0]), "starts at a turn boundary");
        assert_eq!(msgs.len(), 4, "only the current turn is left");
        assert_eq!(msgs[0], Message::user_text("prompt 9"));
        assert_eq!(r.compacted_messages, 36);
        assert_eq!(r.tokens_after, estimate_messages(&msgs));
        // Short outputs were not stubbed (a stub would be longer).
        assert!(
            matches!(&msgs[2].content[0], Block::ToolResult { output, .. } if output.len() == 10)
        );
    }

    #[test]
    fn scaled_figures_and_framing_after_drops_are_exact() {
        // Two user messages in a row at a drop point: the framing of the survivor is counted.
        let mut msgs = turn(0, 2000);
        msgs.push(Message::user_text("a note"));
        msgs.extend(turn(1, 2000));
        msgs.extend(turn(2, 2000));
        let current = msgs.len() - 4;
        let s = Scale::learn(3, 2);
        for target in [0, 500, 900, 1500, 2000, 10_000] {
            let mut m = msgs.clone();
            let r = compact(&mut m, current, 7, s, target);
            assert_eq!(r.tokens_after, Scale::apply(s, 7 + estimate_messages(&m)));
            assert_eq!(
                r.tokens_before,
                Scale::apply(s, 7 + estimate_messages(&msgs))
            );
            assert_eq!(m[m.len() - 4..], msgs[msgs.len() - 4..]);
        }
    }

    #[test]
    fn nothing_to_do_under_target() {
        let mut msgs: Vec<Message> = turn(0, 10);
        let r = compact(&mut msgs, 0, 0, None, 1_000_000);
        assert_eq!(r.compacted_messages, 0);
        assert_eq!(r.tokens_before, r.tokens_after);
        // Over the target but only the current turn: nothing can be cut.
        let r = compact(&mut msgs, 0, 0, None, 1);
        assert_eq!(r.compacted_messages, 0);
        assert_eq!(msgs, turn(0, 10));
    }

    #[test]
    fn stubs_are_not_stubbed_again() {
        let mut msgs: Vec<Message> = (0..3).flat_map(|i| turn(i, 4000)).collect();
        let r1 = compact(&mut msgs, 8, 0, None, 1200);
        assert!(r1.compacted_messages > 0);
        let snapshot = msgs.clone();
        let r2 = compact(&mut msgs, 8, 0, None, 1200);
        assert_eq!(r2.compacted_messages, 0);
        assert_eq!(msgs, snapshot);
    }

    /// An output no longer than its stub would be is kept: stubbing it would lose its text and
    /// save nothing.
    #[test]
    fn an_output_as_short_as_its_stub_is_kept() {
        let n = (1..200)
            .find(|n| stub_text(*n).chars().count() == *n)
            .expect("a length equal to its own stub's");
        let mut msgs: Vec<Message> = (0..3).flat_map(|i| turn(i, n)).collect();
        let snapshot = msgs.clone();
        // Reached by dropping the oldest turn alone; stubbing saves nothing on the way.
        let target = estimate_messages(&msgs[4..]);
        let r = compact(&mut msgs, 8, 0, None, target);
        assert_eq!(r.tokens_after, target);
        assert_eq!(
            r.compacted_messages, 4,
            "the oldest turn dropped, nothing stubbed"
        );
        assert_eq!(msgs[..], snapshot[4..]);
    }

    #[test]
    fn a_prompt_is_a_user_message_with_text_and_no_tool_result() {
        let msgs = turn(0, 10);
        assert!(is_prompt(&msgs[0]));
        assert!(!is_prompt(&msgs[1]), "an assistant's tool call");
        assert!(
            !is_prompt(&msgs[2]),
            "a user message carrying a tool result"
        );
        assert!(!is_prompt(&msgs[3]), "an assistant's text");
        let mut mixed = msgs[2].clone();
        mixed.content.push(Block::text("and a note"));
        assert!(
            !is_prompt(&mixed),
            "text beside a tool result is not a prompt"
        );
    }

    /// With no current turn (its start past the end), every turn may go.
    #[test]
    fn compacting_with_no_current_turn_can_drop_every_turn() {
        let mut msgs: Vec<Message> = (0..2).flat_map(|i| turn(i, 10)).collect();
        let len = msgs.len();
        let r = compact(&mut msgs, len, 0, None, 0);
        assert!(msgs.is_empty());
        assert_eq!(r.compacted_messages, len as u64);
    }

    #[test]
    fn verdicts() {
        // context 10_000: reserve 2_500, budget 7_500, trigger 6_750.
        assert_eq!(budget(10_000), 7_500);
        assert_eq!(budget(1_000_000), 1_000_000 - 8192);
        assert_eq!(verdict(10_000, 6_750, 10), Verdict::Fits);
        assert_eq!(
            verdict(10_000, 6_751, 10),
            Verdict::Compact {
                target: 10 + 7_490 * 60 / 100
            }
        );
        assert_eq!(verdict(10_000, 9_000, 7_500), Verdict::SchemasFill);
        assert_eq!(budget_tokens(10_000, 500), 7_000);
        assert!(schemas_over_budget(3_501, 7_000));
        assert!(!schemas_over_budget(3_500, 7_000));
    }
}
