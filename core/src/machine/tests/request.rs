//! The request the core shapes, sends and counts: user messages merged with tool results
//! first, and the estimate of a conversation equal to the estimate of its body.

use super::*;
use crate::compaction;
use crate::conversation::Role;

#[test]
fn request_bodies_merge_user_messages_with_tool_results_first() {
    let mut c = config();
    c.mode = Mode::Auto;
    c.permissions.deny = vec![Rule::parse("write_file").unwrap()];
    let mut h = H::with(c);
    h.user("go");
    h.items(vec![
        ProviderItem::ToolCallStart {
            index: 0,
            id: "a".into(),
            name: "write_file".into(),
        },
        ProviderItem::ToolCallStart {
            index: 1,
            id: "b".into(),
            name: "write_file".into(),
        },
        ProviderItem::Completed {
            finish_reason: "tool_use".into(),
        },
    ]);
    h.planned("a", plan(true));
    h.planned("b", plan(true));
    let body = h.last_body();
    assert_eq!(body.messages.len(), 3);
    let kinds: Vec<&str> = body.messages[2]
        .content
        .iter()
        .map(|b| match b {
            Block::ToolResult { .. } => "result",
            Block::Text { .. } => "text",
            Block::Thinking { .. } | Block::ToolUse { .. } | Block::Image(_) => "other",
        })
        .collect();
    assert_eq!(kinds, ["result", "result", "text", "text"]);
    h.reply("ok");
}

/// The conversations the machine holds when it sends: every call answered in the user message
/// after it (results in any order, notes beside them), consecutive messages of one role, empty
/// messages. Shaping them only merges, so the estimate of the conversation (the `budget`
/// figure, the compaction trigger) is the estimate of the body sent.
#[test]
fn the_estimate_of_a_conversation_is_the_estimate_of_its_request_body() {
    let mut rng = crate::rng::SplitMix64::new(9);
    for case in 0..300 {
        let mut conv: Vec<Message> = Vec::new();
        let mut next_id = 0;
        for _ in 0..rng.next_u64() % 6 {
            let r = rng.next_u64();
            conv.push(Message::user_text("p".repeat((r % 37) as usize + 1)));
            if r.is_multiple_of(5) {
                conv.push(Message::user_text("[openmax note] n"));
            }
            let calls = (r >> 8) % 3;
            let mut content = vec![Block::text("t".repeat((r % 11) as usize))];
            let ids: Vec<String> = (0..calls)
                .map(|_| {
                    next_id += 1;
                    format!("c{next_id}")
                })
                .collect();
            content.extend(ids.iter().map(|id| Block::ToolUse {
                id: id.clone(),
                name: "read_file".into(),
                input: json!({"k": id}),
            }));
            conv.push(Message {
                role: Role::Assistant,
                content,
            });
            if !ids.is_empty() {
                let mut results: Vec<Block> = ids
                    .iter()
                    .rev()
                    .map(|id| Block::ToolResult {
                        id: id.clone(),
                        ok: true,
                        output: "o".repeat((r % 53) as usize),
                    })
                    .collect();
                if (r >> 16).is_multiple_of(2) {
                    results.insert(0, Block::text("[openmax note] rides the result"));
                }
                conv.push(Message {
                    role: Role::User,
                    content: results,
                });
                if (r >> 17).is_multiple_of(3) {
                    conv.push(Message {
                        role: Role::User,
                        content: vec![],
                    });
                }
                conv.push(Message::assistant_text("done"));
            }
        }
        let body = ModelRequest::shaped(&freeze().system, &freeze().tools, &conv);
        assert_eq!(
            compaction::estimate_request(&freeze().system, &freeze().tools, &conv),
            compaction::estimate_body(&body),
            "case {case}: {conv:#?}"
        );
    }
}
