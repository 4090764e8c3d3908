//! Persistence before receipts: the events a client may treat as durable (`message_done`,
//! `tool_end`, `turn_refused`, a `compacted` receipt) go out only in the drain of the
//! `Persisted` ack of the ticket that carried their record.

use openmax_core::conversation::{Block, Role};
use openmax_core::machine::Output;
use openmax_core::record::Record;
use openmax_core::wire::Event;
use openmax_core::wire::StopReason;

use super::segment::{acked_records, assistant_texts, persists, record_messages};
use crate::scenario::Scenario;
use crate::trace::Run;

/// Every `message_done` with text, `tool_end`, `turn_refused` and `compacted` receipt that
/// changed something is emitted in the drain of the `Persisted` input for the ticket whose
/// records hold it. The one exception is a `tool_end` a failing turn forces at once (the
/// same drain ends the turn `error`).
pub fn receipts_follow_their_persist_ack(_sc: &Scenario, run: &Run) -> Vec<String> {
    let mut v = Vec::new();
    let all = persists(run);
    for (i, fed) in run.trace.iter().enumerate() {
        let records = acked_records(&all, run, i);
        let messages: Vec<_> = records.iter().flat_map(record_messages).collect();
        let fails_turn = fed.outputs.iter().any(
            |o| matches!(o, Output::Event(Event::Done { stop_reason }) if *stop_reason == StopReason::Error),
        );
        for o in &fed.outputs {
            let Output::Event(e) = o else { continue };
            let held = match e {
                Event::MessageDone { text } if !text.is_empty() => {
                    assistant_texts(messages.iter().copied()).contains(text)
                }
                Event::ToolEnd { call_id, .. } => {
                    fails_turn
                        || messages.iter().any(|m| {
                            m.role == Role::User
                                && m.content.iter().any(
                                    |b| matches!(b, Block::ToolResult { id, .. } if id == call_id),
                                )
                        })
                }
                Event::TurnRefused { reason, .. } => messages.iter().any(|m| {
                    m.role == Role::User
                        && m.content
                            .iter()
                            .any(|b| matches!(b, Block::Text { text } if text == reason))
                }),
                Event::Compacted {
                    compacted_messages, ..
                } if *compacted_messages > 0 => records
                    .iter()
                    .any(|r| matches!(r, Record::Compaction { .. })),
                _ => continue,
            };
            if !held {
                v.push(format!(
                    "{} at input #{i} went out before the ack of the record that carries it",
                    run.line(e)
                ));
            }
        }
    }
    v
}
