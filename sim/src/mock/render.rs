//! Rendering one scripted stream ([`crate::script::Reply::Stream`]) into the bytes a provider
//! sends, split the way the server paces them: a prelude sent with the headers, one chunk per
//! script item (sent `delay_ms` apart), and how the body ends.
//!
//! Pure and deterministic: the same script and request give the same bytes (fixed ids and
//! timestamps derived from the request's sequence number). Invariants:
//! - every script item yields exactly one step (possibly empty, e.g. a `Usage` item, whose
//!   counts are reported where the flavor reports usage);
//! - a block of the block-structured flavors (Anthropic content blocks, Responses output items)
//!   is closed lazily, when the next item of another kind arrives or at completion, so a run of
//!   `Text` items is one block with one delta per item;
//! - a tool call's JSON arguments are split into at least two pieces whenever the compact JSON
//!   has two or more characters.

use bytes::Bytes;

use super::encode::{usage_for, Encoder, RequestFacts};
use super::{anthropic, chat, damage, responses};
use crate::script::{Flavor, StreamEnd, StreamItem};

/// The bytes of one scripted stream, in sending order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// Sent at once with the 200 headers (Anthropic `message_start` + `ping`; Responses
    /// `response.created` + `response.in_progress`; Chat the first chunk with the role).
    pub prelude: Bytes,
    /// One entry per script item, in order (empty for items that emit nothing in place).
    pub steps: Vec<Bytes>,
    /// How the body ends after the steps.
    pub tail: Tail,
}

/// How a rendered body ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tail {
    /// Send these bytes (the completion or error events; empty for a clean EOF), then end the
    /// body properly (the terminating chunk).
    End(Bytes),
    /// Cut the connection: no terminating chunk.
    Abort,
    /// Keep the body open and silent until the client goes away or the server stops.
    Stall,
    /// Send `first`, then `repeat` over and over until the client goes away or the server
    /// stops.
    Endless { first: Bytes, repeat: Bytes },
}

impl Rendered {
    /// Every byte a client sees for a stream that ends (`End`), for checks on captured streams.
    pub fn concat(&self) -> Vec<u8> {
        let mut out = self.prelude.to_vec();
        for step in &self.steps {
            out.extend_from_slice(step);
        }
        if let Tail::End(bytes) = &self.tail {
            out.extend_from_slice(bytes);
        }
        out
    }
}

/// Render a scripted stream in `flavor`'s wire format for the request described by `facts`.
pub fn render_stream(
    flavor: Flavor,
    facts: &RequestFacts,
    items: &[StreamItem],
    end: &StreamEnd,
) -> Rendered {
    let usage = usage_for(items, facts.body_len);
    let mut enc: Box<dyn Encoder> = match flavor {
        Flavor::Anthropic => Box::new(anthropic::Encoder::new(facts, usage)),
        Flavor::Openai => Box::new(responses::Encoder::new(facts, usage)),
        Flavor::OpenaiChat => Box::new(chat::Encoder::new(facts, usage)),
    };
    let prelude = Bytes::from(enc.prelude());
    let steps = items
        .iter()
        .map(|item| Bytes::from(damage::step(enc.as_mut(), item)))
        .collect();
    let tail = match end {
        StreamEnd::Complete { finish } => {
            let has_tools = items
                .iter()
                .any(|i| matches!(i, StreamItem::ToolCall { .. }));
            let finish = finish
                .clone()
                .unwrap_or_else(|| flavor.default_finish(has_tools).to_string());
            Tail::End(Bytes::from(enc.complete(&finish)))
        }
        StreamEnd::Error { error, message } => Tail::End(Bytes::from(enc.error(error, message))),
        StreamEnd::CleanEof => Tail::End(Bytes::new()),
        StreamEnd::Abort => Tail::Abort,
        StreamEnd::Stall => Tail::Stall,
        StreamEnd::Endless { delta_bytes } => {
            let delta = StreamItem::Text {
                text: "x".repeat((*delta_bytes).max(1)),
            };
            // The first opens a text block when the items left none open; the rest are deltas.
            let first = Bytes::from(enc.item(&delta));
            let repeat = Bytes::from(enc.item(&delta));
            Tail::Endless { first, repeat }
        }
    };
    Rendered {
        prelude,
        steps,
        tail,
    }
}
