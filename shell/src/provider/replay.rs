//! History replay helpers shared by the request-body builders.
//!
//! Invariants of [`merged`]'s output, which every API needs:
//! - roles alternate (Anthropic requires it; strict chat templates of local servers do too):
//!   consecutive messages of one role are merged, keeping block order;
//! - every tool call of an assistant message has exactly one result in the next user message
//!   (all three APIs reject a call without a result, or a result for no call): a missing result
//!   (a call cut off by a cancel, a crash, a trimmed history) is filled in as a failed result,
//!   and a result that answers no call of the message before it is dropped.

use std::collections::BTreeSet;

use openmax_core::conversation::{Block, Message, Role};

/// The output of a tool call whose result is missing from the history.
pub const MISSING_RESULT: &str = "(no result was recorded for this call)";

/// The messages with roles alternating and every tool call paired with one result.
pub fn merged(messages: &[Message]) -> Vec<Message> {
    let mut out: Vec<Message> = Vec::with_capacity(messages.len());
    for m in messages {
        match out.last_mut() {
            Some(last) if last.role == m.role => last.content.extend(m.content.iter().cloned()),
            _ => out.push(m.clone()),
        }
    }
    pair_results(&mut out);
    out
}

fn call_ids(m: &Message) -> Vec<String> {
    m.content
        .iter()
        .filter_map(|b| match b {
            Block::ToolUse { id, .. } => Some(id.clone()),
            _ => None,
        })
        .collect()
}

fn pair_results(msgs: &mut Vec<Message>) {
    let mut i = 0;
    while i < msgs.len() {
        if msgs[i].role == Role::User {
            // Results here must answer the assistant message just before (none for the first).
            let calls: BTreeSet<String> = match i.checked_sub(1) {
                Some(p) => call_ids(&msgs[p]).into_iter().collect(),
                None => BTreeSet::new(),
            };
            let mut seen = BTreeSet::new();
            msgs[i].content.retain(|b| match b {
                Block::ToolResult { id, .. } => calls.contains(id) && seen.insert(id.clone()),
                _ => true,
            });
        } else {
            let calls = call_ids(&msgs[i]);
            if !calls.is_empty() {
                if msgs.get(i + 1).is_none() {
                    msgs.push(Message {
                        role: Role::User,
                        content: Vec::new(),
                    });
                }
                let answered: BTreeSet<String> = msgs[i + 1]
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        Block::ToolResult { id, .. } => Some(id.clone()),
                        _ => None,
                    })
                    .collect();
                let missing: Vec<Block> = calls
                    .into_iter()
                    .filter(|id| !answered.contains(id))
                    .map(|id| Block::ToolResult {
                        id,
                        ok: false,
                        output: MISSING_RESULT.to_string(),
                    })
                    .collect();
                msgs[i + 1].content.splice(0..0, missing);
            }
        }
        i += 1;
    }
}

/// A tool result's text as sent to APIs that have no error flag for it.
pub fn result_text(ok: bool, output: &str) -> String {
    if ok {
        output.to_string()
    } else {
        format!("[tool call failed]\n{output}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_same_role_messages_merge() {
        let msgs = vec![
            Message::user_text("a"),
            Message::user_text("b"),
            Message::assistant_text("c"),
            Message::user_text("d"),
        ];
        let m = merged(&msgs);
        assert_eq!(m.len(), 3);
        assert_eq!(m[0].role, Role::User);
        assert_eq!(m[0].content, vec![Block::text("a"), Block::text("b")]);
        assert_eq!(m[2].plain_text(), "d");
    }

    fn call(id: &str) -> Block {
        Block::ToolUse {
            id: id.into(),
            name: "shell".into(),
            input: serde_json::json!({}),
        }
    }

    fn result(id: &str) -> Block {
        Block::ToolResult {
            id: id.into(),
            ok: true,
            output: "out".into(),
        }
    }

    #[test]
    fn missing_results_are_filled_and_stray_ones_dropped() {
        let msgs = vec![
            Message {
                role: Role::User,
                content: vec![Block::text("go"), result("stray")],
            },
            Message {
                role: Role::Assistant,
                content: vec![call("a"), call("b")],
            },
            Message {
                role: Role::User,
                content: vec![result("b"), result("b"), result("zzz"), Block::text("next")],
            },
            Message {
                role: Role::Assistant,
                content: vec![call("c")],
            },
        ];
        let m = merged(&msgs);
        assert_eq!(m[0].content, vec![Block::text("go")]);
        assert_eq!(
            m[2].content,
            vec![
                Block::ToolResult {
                    id: "a".into(),
                    ok: false,
                    output: MISSING_RESULT.into()
                },
                result("b"),
                Block::text("next")
            ]
        );
        assert_eq!(m.len(), 5);
        assert_eq!(m[4].role, Role::User);
        assert!(
            matches!(&m[4].content[..], [Block::ToolResult { id, ok: false, .. }] if id == "c")
        );
    }
}
