//! History replay helpers shared by the request-body builders.
//!
//! Every API wants alternating roles (Anthropic requires it; strict chat templates of local
//! servers do too), so consecutive messages of one role are merged, keeping block order.

use openmax_core::conversation::Message;

/// The messages with consecutive same-role messages merged into one, blocks in order.
pub fn merged(messages: &[Message]) -> Vec<Message> {
    let mut out: Vec<Message> = Vec::with_capacity(messages.len());
    for m in messages {
        match out.last_mut() {
            Some(last) if last.role == m.role => last.content.extend(m.content.iter().cloned()),
            _ => out.push(m.clone()),
        }
    }
    out
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
    use openmax_core::conversation::{Block, Role};

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
}
